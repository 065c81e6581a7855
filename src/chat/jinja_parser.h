// chat/jinja_parser.h — builds the syntax tree of a chat template from its tokens.
// Owns: the grammar (statements, operator precedence, argument lists) and parse-time checks (unknown
// filters and tests, break/continue outside a loop, nesting limits). Must not: evaluate anything.
//
// Precedence, loosest first: `a if c else b` < or < and < not < comparisons and (not) in < + - < ~ <
// * / // % < ** < unary sign < filters `|` and tests `is` < attribute, item, slice and call. This is
// Python Jinja's order; the reference (@huggingface/jinja) differs only in giving ~ the precedence of + -,
// which changes nothing for the string concatenations templates write.
#pragma once

#include <memory>
#include <string>

#include "chat/jinja_ast.h"

namespace helium::jinja {

// Nesting depth (parenthesised expressions, nested statements) beyond which a template is refused, so
// that parsing and evaluation stay within a small, fixed stack.
inline constexpr int kMaxParseDepth = 100;

// Throws JinjaError with the byte offset of the problem in `source`.
std::unique_ptr<const Program> parse_program(std::string_view source);

}  // namespace helium::jinja
