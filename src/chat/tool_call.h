// chat/tool_call.h — the pieces the output parsers are built from: the request's tools (names and
// parameter schemas), the content-parser interface every format implements, and one content parser per
// tool-call family (Hermes JSON, Qwen3-Coder XML, Llama 3 JSON; GPT-OSS harmony is in
// output_parser_harmony.h).
// Owns: reading a request's `tools` array, converting a raw parameter value by its schema, normalising
// call arguments to compact JSON object text, finding where a JSON value ends in a growing buffer, and
// the streaming tool-call grammars. Must not: assign call ids or build server events (output_parser.h
// does), split reasoning off (reasoning.h does), or know any HTTP API's wire format.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace helium {

// The functions a request offers, by name, with the JSON schema of their parameters. Reads the three
// shapes the server's APIs send: OpenAI Chat `{"type":"function","function":{"name","parameters"}}`,
// Responses `{"type":"function","name","parameters"}` and Anthropic `{"name","input_schema"}`;
// Responses `namespace` entries are flattened. Entries without a readable function name (web_search,
// image_generation, ...) contribute nothing: a tool type we cannot call is never an error.
class ToolSet {
 public:
  // An unrestricted set: any function name is accepted and no schema is known.
  ToolSet() = default;
  // `tools` is null (unrestricted) or the request's array (restricted to its names; an empty array
  // accepts no call at all). Anything else is an error.
  static Result<ToolSet> from_request_tools(const nlohmann::json& tools);

  bool restricts_names() const { return restricts_names_; }
  // Whether a call to `name` may be accepted.
  bool accepts(std::string_view name) const;
  // The schema of one parameter of a function, or nullptr when unknown.
  const nlohmann::json* parameter_schema(std::string_view function, std::string_view parameter) const;

  // Converts a raw XML parameter value by its schema: a parameter typed only "string" keeps the raw
  // text; other types (integer, number, boolean, object, array, null) are parsed as JSON and kept when
  // the parsed value has one of the allowed types, else the raw text is kept (the tool reports the
  // schema violation; hiding the call would be worse). Without a schema: JSON if the text parses as
  // JSON, else the raw text.
  nlohmann::ordered_json convert_parameter(std::string_view function, std::string_view parameter,
                                           std::string_view raw_value) const;

 private:
  void add_function(const nlohmann::json& entry);
  bool restricts_names_ = false;
  std::map<std::string, nlohmann::json, std::less<>> parameters_by_function_;  // name -> parameters schema
};

// Call arguments as compact JSON object text: an object is dumped as it is (key order kept), a string
// is parsed and must hold an object, a missing value (null) is "{}". Anything else: nullopt.
std::optional<std::string> normalize_arguments(const nlohmann::ordered_json& arguments);

// Parses JSON text without throwing; nullopt when it is not one complete JSON value.
std::optional<nlohmann::ordered_json> parse_json_text(std::string_view text);

// Compact JSON text that never throws: invalid UTF-8 in strings is replaced by U+FFFD.
std::string dump_compact_json(const nlohmann::ordered_json& value);

// Follows the lexical structure of one JSON object or array in a buffer that grows between calls, to
// learn where it ends without parsing it, and to reject early what can never be JSON (a '<' outside a
// string, a raw control character inside one, mismatched brackets). The buffer must start with the
// value's opening bracket and each call must pass the same bytes extended at the end.
class JsonValueScanner {
 public:
  enum class State { kInside, kComplete, kInvalid };
  State scan(std::string_view buffer);
  // Once complete: the length of the value (through its closing bracket).
  size_t length() const { return pos_; }

 private:
  size_t pos_ = 0;
  std::string open_brackets_;
  bool in_string_ = false;
  bool escaped_ = false;
  State state_ = State::kInside;
};

// One call as a content parser found it: the function name, its arguments as compact JSON object text,
// and the markup it was parsed from (a block that holds several calls gives all its markup to the first).
struct ParsedToolCall {
  std::string name;
  std::string arguments;
  std::string raw;
  bool operator==(const ParsedToolCall&) const = default;
};

// Receives what a content parser finds, in output order.
class ContentSink {
 public:
  virtual ~ContentSink() = default;
  virtual void on_text(std::string_view text) = 0;
  virtual void on_reasoning(std::string_view text) = 0;
  virtual void on_tool_call(ParsedToolCall call) = 0;
};

// A streaming parser of model output. feed() takes any chunking of the text; everything it reports is
// final (a later chunk never changes it). finish() resolves what is still held back.
class ContentParser {
 public:
  virtual ~ContentParser() = default;
  virtual void feed(std::string_view chunk, ContentSink& sink) = 0;
  virtual void finish(ContentSink& sink) = 0;
};

// Passes everything through as text.
std::unique_ptr<ContentParser> make_plain_text_parser();
// `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Qwen 2.5/3, Hermes).
std::unique_ptr<ContentParser> make_hermes_tool_call_parser(const ToolSet& tools);
// `<tool_call><function=NAME><parameter=P>value</parameter>...</function></tool_call>` blocks
// (Qwen3-Coder, Qwen3.5); values converted by the tools' schemas.
std::unique_ptr<ContentParser> make_qwen3_coder_tool_call_parser(const ToolSet& tools);
// A whole message that is `{"name": ..., "parameters": {...}}` (or several joined by ';'), optionally
// after `<|python_tag|>` (Llama 3.1-3.3).
std::unique_ptr<ContentParser> make_llama3_tool_call_parser(const ToolSet& tools);

}  // namespace helium
