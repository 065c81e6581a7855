// chat/jinja_text.h — the text primitives the Jinja interpreter needs: UTF-8 stepping, the whitespace
// set of JavaScript's \s and String.prototype.trim (which @huggingface/jinja, the reference, uses for
// whitespace control, trim and split), case mapping, and JSON string escaping.
// Owns: these byte-level helpers. Must not: know templates, values or the AST.
#pragma once

#include "core/utf8.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace helium::jinja {

// Decodes the code point starting at `pos` and advances `pos` past it. An invalid or truncated sequence
// yields the single byte as its own "code point" (0x80..0xFF) so that every byte is visited exactly once.
char32_t next_code_point(std::string_view text, size_t& pos);
// Length in bytes of the UTF-8 sequence starting with `lead` (1 for an invalid lead byte).
size_t utf8_sequence_length(unsigned char lead);
using helium::append_utf8;
// Number of code points (invalid bytes count one each).
size_t code_point_count(std::string_view text);

// JavaScript's whitespace: \t \n \v \f \r, space, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000, U+FEFF.
bool is_js_whitespace(char32_t cp);
// Byte length of the JavaScript whitespace run that starts at `pos` (0 when none).
size_t js_whitespace_prefix(std::string_view text, size_t pos = 0);
// Byte length of the JavaScript whitespace run that ends at `end` (0 when none).
size_t js_whitespace_suffix(std::string_view text, size_t end);
std::string_view js_trim(std::string_view text);
std::string_view js_trim_start(std::string_view text);
std::string_view js_trim_end(std::string_view text);
// Python's str.strip(chars) / lstrip / rstrip with an explicit set of characters (code points).
std::string_view strip_chars(std::string_view text, std::string_view chars, bool left, bool right);

// ASCII word character: [A-Za-z0-9_] (JavaScript's \w without the u flag).
inline bool is_ascii_word(char32_t cp) {
  return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == '_';
}

// Simple (one-to-one) Unicode case mapping of every code point.
std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);

// Appends `text` as a JSON string literal with the escaping that Python's json.dumps and JavaScript's
// JSON.stringify share: \" \\ \b \f \n \r \t, other controls as \u00XX; with ensure_ascii, every code
// point above 0x7E as \uXXXX (surrogate pairs above the BMP), as both do.
void append_json_string(std::string& out, std::string_view text, bool ensure_ascii);

}  // namespace helium::jinja
