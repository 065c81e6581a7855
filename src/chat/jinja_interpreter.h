// chat/jinja_interpreter.h — renders a parsed chat template with a set of variables.
// Owns: evaluation of statements and expressions, variable scopes, macros and call blocks, loops, and the
// resource limits of a render. Must not: parse, or know chat messages (chat_template.cpp builds the
// variables).
//
// Semantics are @huggingface/jinja's (the reference the tests compare with byte for byte), including
// its scoping: `set` inside a for loop stays in the loop, `if` opens no scope, macros see the variables
// of their caller. Where the reference lacks a feature or raises and Python Jinja renders, helium
// renders as Python does (e.g. the `reject`/`select` filters, loop output before a `break` is kept,
// `strip(chars)`, string iteration, tests with arguments). Where both render but differently, helium
// follows the reference, except for these JavaScript artifacts, where it follows Python:
//   - strings are indexed, sliced and measured in code points (the reference uses UTF-16 units);
//   - an integral float stays a float ("2.0"; JavaScript has no such distinction and prints "2" in
//     tojson and in `~`), and JSON numbers keep their integer/float type;
//   - `%` takes the sign of the divisor and division by zero is an error;
//   - lists and dicts compare by content with `==` (the reference compares identity);
//   - `~` is evaluated tighter than `+`/`-` (Python's precedence);
//   - Unicode case mapping is per code point (so "ß".upper() stays "ß");
//   - \r\n and \r line endings in the template are read as \n (jinja_lexer.h);
//   - values print as Python prints them: `{{ }}`, `~`, `join` and `string` write True/False/None and
//     lists/dicts as Python's repr (['a', 1], {'k': None}), where the reference writes true/false, ""
//     and JSON (Qwen3-Coder prints optional parameters' type lists this way: ['string', 'null']); only
//     undefined prints nothing.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_builtins.h"

namespace helium::jinja {

struct RenderOptions {
  RenderLimits limits;
  std::optional<CivilTime> now;  // the time strftime_now() formats; the local clock when empty
};

// Renders `program` with the given top-level variables (later entries replace earlier ones of the same
// name). Throws JinjaError (with the offset of the failing node when known) on any template error.
// Thread-safe: a Program is read-only here, and all render state is local to the call.
std::string render_program(const Program& program,
                           const std::vector<std::pair<std::string, Value>>& variables,
                           const RenderOptions& options);

}  // namespace helium::jinja
