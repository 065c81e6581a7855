// chat/output_parser.h — turns a response's streamed output text into structured content: text,
// reasoning and tool calls, as events the server maps to OpenAI `delta.tool_calls`, Anthropic
// `input_json_delta` and Responses `function_call_arguments.delta`.
// Owns: the choice of parser per model family, call ids, the event stream and the final message.
// Streaming-safe across any chunk boundary (mid-tag, mid-UTF-8) and failing closed: markup that does
// not parse completely as a call comes back as text, exactly as generated. Must not: know HTTP, an
// API's wire format, tokens, or the engine; the formats themselves live in tool_call*.cpp,
// reasoning.cpp and output_parser_harmony.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace helium {

// How a model family writes tool calls.
enum class ToolCallFormat {
  kNone,           // no tool calls: all content is text
  kHermesJson,     // <tool_call>{"name", "arguments"}</tool_call> (Qwen 2.5, Qwen3, Hermes)
  kQwen3CoderXml,  // <tool_call><function=NAME><parameter=P>...</tool_call> (Qwen3-Coder, Qwen3.5)
  kLlama3Json,     // the whole message is {"name", "parameters"} (Llama 3.1-3.3)
  kHarmony,        // GPT-OSS channels; also decides reasoning, so ReasoningFormat is ignored
};

// How a model family marks reasoning.
enum class ReasoningFormat {
  kNone,
  kThinkTags,  // <think>...</think> at the start of the output
};

struct OutputFormat {
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  ReasoningFormat reasoning = ReasoningFormat::kNone;
};

// Picks the formats from the chat template's text (what the template tells the model to write), or,
// when there is no template, from config.json's model_type. Unknown families get kNone for both.
OutputFormat detect_output_format(std::string_view model_type, std::string_view chat_template);

// "none", "hermes", "qwen3_coder", "llama3_json", "harmony": for flags and logs.
std::string_view tool_call_format_name(ToolCallFormat format);
std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object as compact text
  bool operator==(const ToolCall&) const = default;
};

// What a stream parser emits, in output order. Text and reasoning come as deltas. A tool call comes
// only once it has parsed completely, as kToolCallBegin (name and id), kToolCallArguments (the
// arguments JSON text; the deltas of one call concatenate to ToolCall::arguments) and kToolCallEnd.
struct ParserEvent {
  enum Kind { kText, kReasoning, kToolCallBegin, kToolCallArguments, kToolCallEnd };
  Kind kind = kText;
  std::string text;       // kText, kReasoning, kToolCallArguments: the delta
  int tool_index = -1;    // tool events: 0, 1, ... in call order within the response
  std::string tool_name;  // tool events
  std::string tool_id;    // tool events
  bool operator==(const ParserEvent&) const = default;
};

// Everything a response said, once finished (or so far, while streaming).
struct ParsedMessage {
  std::string text;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedMessage&) const = default;
};

struct OutputParserOptions {
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  // The prompt already opened <think> (see prompt_opens_reasoning in reasoning.h): the output starts as
  // reasoning and ends it with </think>. Implies kThinkTags.
  bool starts_in_reasoning = false;
  // The request's tools array (OpenAI, Responses or Anthropic shape). A call to a function not in it
  // is text. Null accepts any name; a request without tools should pass an empty array, so that a call
  // the model invents comes back as text.
  nlohmann::json tools;
  // Call ids are prefix + 22 base62 characters derived from (seed, call index): unique within a
  // response, and reproducible. The server passes a fresh random seed per response.
  std::string tool_call_id_prefix = "call_";
  uint64_t tool_call_id_seed = 0;
};

// One per response. Not thread-safe; feed and finish from one thread.
class OutputParser {
 public:
  // Fails only when the options are unusable (tools neither null nor an array).
  static Result<std::unique_ptr<OutputParser>> create(const OutputParserOptions& options);
  ~OutputParser();
  OutputParser(const OutputParser&) = delete;
  OutputParser& operator=(const OutputParser&) = delete;

  // Takes the next piece of output text, cut anywhere. Returns the events it made certain: text is held
  // back only while it could still be the start of a tag (or an unfinished UTF-8 sequence, or
  // whitespace that is dropped if a call follows), a call until it has parsed completely.
  std::vector<ParserEvent> feed(std::string_view chunk);
  // End of output: resolves what is held back. An unterminated call is text; unterminated reasoning is
  // reasoning. Later calls to feed or finish return nothing.
  std::vector<ParserEvent> finish();

  const ParsedMessage& message() const;
  bool finished() const;

 private:
  struct State;
  explicit OutputParser(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

inline Result<std::unique_ptr<OutputParser>> make_output_parser(const OutputParserOptions& options) {
  return OutputParser::create(options);
}

// The whole output at once: the same as one feed and finish.
Result<ParsedMessage> parse_output(const OutputParserOptions& options, std::string_view output);

// prefix + 22 base62 characters; distinct indexes give distinct ids for one seed.
std::string make_tool_call_id(std::string_view prefix, uint64_t seed, int index);

}  // namespace helium
