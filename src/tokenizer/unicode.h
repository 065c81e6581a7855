// tokenizer/unicode.h — the UTF-8 and Unicode facts the tokenizer pipeline needs.
// Owns: UTF-8 decoding/encoding, replacement of invalid UTF-8, character properties (through utf8proc),
// normalization forms and lowercasing. Must not: know tokenizer.json or any tokenizer component.
#pragma once

#include "core/utf8.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace helium::tokenizer_json::unicode {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// True when `bytes` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

// Replaces every ill-formed subsequence by U+FFFD with the WHATWG decoder's "maximal subpart" rule, the
// rule of JavaScript's TextDecoder and Rust's String::from_utf8_lossy: "\xE4\xB8" gives one U+FFFD,
// "\xED\xA0\x80" (an encoded surrogate) gives three. A byte order mark is kept as U+FEFF.
std::string to_valid_utf8(std::string_view bytes);

// Byte length of the UTF-8 sequence that `lead` starts (1 for a continuation byte, so that a walk over
// valid text never stalls).
inline size_t sequence_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes the code point starting at `pos` of valid UTF-8 and moves `pos` past it.
char32_t decode_next(std::string_view text, size_t& pos);
// Where the character ending just before `end` (> 0) starts, in valid UTF-8.
size_t char_start_before(std::string_view text, size_t end);
// The code point ending just before `end` (> 0) in valid UTF-8.
char32_t decode_before(std::string_view text, size_t end);
using helium::append_utf8;

// Unicode White_Space (what Oniguruma's and Rust's `\s` and char::is_whitespace match). Unlike PCRE2's
// `\s` it excludes U+180E, and unlike JavaScript's it excludes U+FEFF.
bool is_white_space(char32_t cp);
// General category groups, from utf8proc's tables.
bool is_letter(char32_t cp);       // L*
bool is_mark(char32_t cp);         // Mn, Mc, Me
bool is_numeric(char32_t cp);      // Nd, Nl, No (Rust's char::is_numeric)
bool is_punctuation(char32_t cp);  // Pc, Pd, Ps, Pe, Pi, Pf, Po

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// Unicode normalization of valid UTF-8.
std::string normalize(std::string_view text, NormalForm form);

// Full lowercase mapping of valid UTF-8 as Rust's str::to_lowercase does it: U+0130 becomes "i̇" and a
// capital sigma at the end of a word becomes "ς".
std::string to_lowercase(std::string_view text);

}  // namespace helium::tokenizer_json::unicode
