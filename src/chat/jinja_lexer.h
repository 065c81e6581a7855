// chat/jinja_lexer.h — turns chat-template source into tokens, with the whitespace handling transformers
// configures (trim_blocks and lstrip_blocks on, one trailing newline dropped), `{%- -%}` / `{{- -}}` /
// `{#- -#}` control, and transformers' `{% generation %}` markers removed, exactly as @huggingface/jinja
// (the reference) does it, so that rendered text matches byte for byte.
// One deliberate difference: \r\n and \r line endings become \n first, as in Python Jinja (the reference
// keeps them, leaking \r into the output of a CRLF template).
// Owns: preprocessing, tokens, and mapping token positions back to line:column of the original source.
// Must not: parse, evaluate, or know chat messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace helium::jinja {

enum class TokenType : uint8_t {
  kText,             // text between tags (value: the text)
  kComment,          // {# ... #} (kept only so that whitespace control sees it, as the reference does)
  kOpenStatement,    // {%
  kCloseStatement,   // %}
  kOpenExpression,   // {{
  kCloseExpression,  // }}
  kNumber,           // 12, 1.5, -3 (a sign right after an operator or opening bracket joins the number)
  kString,           // value: the unescaped contents
  kIdentifier,       // names and keywords alike
  kEquals,           // =
  kOpenParen,
  kCloseParen,
  kOpenBracket,
  kCloseBracket,
  kOpenBrace,
  kCloseBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // == != < > <= >=
  kUnarySign,       // + or - not followed by a number, where a binary operator cannot be
};

struct Token {
  TokenType type;
  std::string value;
  size_t offset;  // byte offset of the token in the original (unprocessed) source
};

// Tokenizes `source`. Throws JinjaError (with the offset of the problem) on a malformed tag, string or
// character.
std::vector<Token> tokenize(std::string_view source);

// 1-based line and column (in code points) of a byte offset into `source`.
struct SourceLocation {
  size_t line = 1;
  size_t column = 1;
};
SourceLocation locate(std::string_view source, size_t offset);
// "line L:C" for messages.
std::string describe_location(std::string_view source, size_t offset);

}  // namespace helium::jinja
