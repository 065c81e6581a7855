// chat/output_parser.cpp — format detection, the parser chain per format, call ids, and the sink that
// turns what the content parsers find into ParserEvents (whole UTF-8 characters, adjacent deltas merged).
#include "chat/output_parser.h"

#include <algorithm>
#include <array>
#include <utility>

#include "chat/output_parser_harmony.h"
#include "chat/reasoning.h"
#include "chat/tool_call.h"

namespace helium {
namespace {

// The length of the longest prefix of `text` that does not end inside a UTF-8 sequence: a multi-byte
// character cut by a chunk boundary waits for its last bytes. Bytes that are not valid UTF-8 anyway
// pass through (they cannot become valid by waiting).
size_t complete_utf8_prefix_length(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for the lead byte
    const size_t needed = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    return back < needed ? n - back : n;
  }
  return n;
}

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void append_base62(uint64_t value, std::string& out) {
  static constexpr char kDigits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  for (int i = 0; i < 11; ++i) {  // 62^11 > 2^64: fixed width keeps the encoding one-to-one
    out.push_back(kDigits[value % 62]);
    value /= 62;
  }
}

constexpr std::array<std::pair<ToolCallFormat, std::string_view>, 5> kFormatNames = {{
    {ToolCallFormat::kNone, "none"},
    {ToolCallFormat::kHermesJson, "hermes"},
    {ToolCallFormat::kQwen3CoderXml, "qwen3_coder"},
    {ToolCallFormat::kLlama3Json, "llama3_json"},
    {ToolCallFormat::kHarmony, "harmony"},
}};

}  // namespace

OutputFormat detect_output_format(std::string_view model_type, std::string_view chat_template) {
  auto mentions = [&](std::string_view text) { return chat_template.find(text) != std::string_view::npos; };
  OutputFormat format;
  if (model_type == "gpt_oss" || mentions("<|channel|>")) {
    format.tool_calls = ToolCallFormat::kHarmony;
    return format;
  }
  if (!chat_template.empty()) {
    if (mentions("<tool_call>")) {
      format.tool_calls = mentions("<function=") ? ToolCallFormat::kQwen3CoderXml : ToolCallFormat::kHermesJson;
    } else if (mentions("<|start_header_id|>") && (mentions("<|python_tag|>") || mentions("ipython"))) {
      // Llama 3.1+ templates render tool results in the ipython role; Llama 3.0's has no tools.
      format.tool_calls = ToolCallFormat::kLlama3Json;
    }
    if (mentions("<think>") || mentions("</think>")) format.reasoning = ReasoningFormat::kThinkTags;
    return format;
  }
  // No template: the families whose output format does not vary between checkpoints.
  if (model_type.starts_with("qwen3_5")) {
    format = {ToolCallFormat::kQwen3CoderXml, ReasoningFormat::kThinkTags};
  } else if (model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "qwen3_next") {
    format = {ToolCallFormat::kHermesJson, ReasoningFormat::kThinkTags};
  } else if (model_type == "qwen2" || model_type == "qwen2_moe") {
    format.tool_calls = ToolCallFormat::kHermesJson;
  }
  return format;
}

std::string_view tool_call_format_name(ToolCallFormat format) {
  for (const auto& [value, name] : kFormatNames) {
    if (value == format) return name;
  }
  return "unknown";
}

std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  for (const auto& [value, format_name] : kFormatNames) {
    if (format_name == name) return value;
  }
  return std::nullopt;
}

std::string make_tool_call_id(std::string_view prefix, uint64_t seed, int index) {
  // seed + (index + 1) * gamma differs for every index, and the splitmix64 finaliser is a bijection,
  // so the first word (and therefore the id) differs too.
  constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
  const uint64_t first = splitmix64_mix(seed + (static_cast<uint64_t>(index) + 1) * kGamma);
  const uint64_t second = splitmix64_mix(first ^ seed ^ kGamma);
  std::string id(prefix);
  append_base62(first, id);
  append_base62(second, id);
  return id;
}

// Receives what the content parser finds and turns it into events and the final message.
struct OutputParser::State final : ContentSink {
  OutputParserOptions options;
  ToolSet tools;                            // referenced by `parser`: declared before it
  std::unique_ptr<ContentParser> parser;
  ParsedMessage message;
  std::vector<ParserEvent>* events = nullptr;  // the vector of the feed/finish in progress
  std::string utf8_carry;                   // the unfinished UTF-8 sequence at the end of the last delta
  ParserEvent::Kind carry_kind = ParserEvent::kText;
  bool finished = false;

  void on_text(std::string_view text) override { add_delta(ParserEvent::kText, text); }
  void on_reasoning(std::string_view text) override { add_delta(ParserEvent::kReasoning, text); }

  void on_tool_call(ParsedToolCall call) override {
    flush_carry();
    const int index = static_cast<int>(message.tool_calls.size());
    ToolCall tool_call{make_tool_call_id(options.tool_call_id_prefix, options.tool_call_id_seed, index),
                       std::move(call.name), std::move(call.arguments)};
    for (ParserEvent::Kind kind : {ParserEvent::kToolCallBegin, ParserEvent::kToolCallArguments,
                                   ParserEvent::kToolCallEnd}) {
      ParserEvent event;
      event.kind = kind;
      event.tool_index = index;
      event.tool_name = tool_call.name;
      event.tool_id = tool_call.id;
      if (kind == ParserEvent::kToolCallArguments) event.text = tool_call.arguments;
      events->push_back(std::move(event));
    }
    message.tool_calls.push_back(std::move(tool_call));
  }

  void add_delta(ParserEvent::Kind kind, std::string_view text) {
    if (!utf8_carry.empty() && carry_kind != kind) flush_carry();
    std::string delta = std::move(utf8_carry);
    delta.append(text);
    const size_t complete = complete_utf8_prefix_length(delta);
    utf8_carry = delta.substr(complete);
    carry_kind = kind;
    delta.resize(complete);
    append_event(kind, delta);
  }

  void flush_carry() {
    std::string carry = std::move(utf8_carry);
    utf8_carry.clear();
    append_event(carry_kind, carry);
  }

  void append_event(ParserEvent::Kind kind, std::string_view text) {
    if (text.empty()) return;
    (kind == ParserEvent::kText ? message.text : message.reasoning).append(text);
    if (!events->empty() && events->back().kind == kind) {
      events->back().text.append(text);
      return;
    }
    ParserEvent event;
    event.kind = kind;
    event.text = std::string(text);
    events->push_back(std::move(event));
  }
};

Result<std::unique_ptr<OutputParser>> OutputParser::create(const OutputParserOptions& options) {
  auto state = std::make_unique<State>();
  state->options = options;
  Result<ToolSet> tools = ToolSet::from_request_tools(options.tools);
  if (!tools.is_ok()) return tools.status().with_context("output parser");
  state->tools = std::move(tools).value();
  const ToolSet& tool_set = state->tools;
  std::unique_ptr<ContentParser> content;
  switch (options.tool_call_format) {
    case ToolCallFormat::kNone:
      content = make_plain_text_parser();
      break;
    case ToolCallFormat::kHermesJson:
      content = make_hermes_tool_call_parser(tool_set);
      break;
    case ToolCallFormat::kQwen3CoderXml:
      content = make_qwen3_coder_tool_call_parser(tool_set);
      break;
    case ToolCallFormat::kLlama3Json:
      content = make_llama3_tool_call_parser(tool_set);
      break;
    case ToolCallFormat::kHarmony:
      content = make_harmony_parser(tool_set);
      break;
  }
  if (!content) return Status::error("output parser: unknown tool call format");
  const bool think_tags = options.reasoning_format == ReasoningFormat::kThinkTags || options.starts_in_reasoning;
  if (think_tags && options.tool_call_format != ToolCallFormat::kHarmony) {
    content = make_think_tag_parser(options.starts_in_reasoning, std::move(content));
  }
  state->parser = std::move(content);
  return std::unique_ptr<OutputParser>(new OutputParser(std::move(state)));
}

OutputParser::OutputParser(std::unique_ptr<State> state) : state_(std::move(state)) {}
OutputParser::~OutputParser() = default;

std::vector<ParserEvent> OutputParser::feed(std::string_view chunk) {
  std::vector<ParserEvent> events;
  if (state_->finished || chunk.empty()) return events;
  state_->events = &events;
  state_->parser->feed(chunk, *state_);
  state_->events = nullptr;
  return events;
}

std::vector<ParserEvent> OutputParser::finish() {
  std::vector<ParserEvent> events;
  if (state_->finished) return events;
  state_->events = &events;
  state_->parser->finish(*state_);
  state_->flush_carry();
  state_->events = nullptr;
  state_->finished = true;
  return events;
}

const ParsedMessage& OutputParser::message() const { return state_->message; }
bool OutputParser::finished() const { return state_->finished; }

Result<ParsedMessage> parse_output(const OutputParserOptions& options, std::string_view output) {
  HELIUM_ASSIGN_OR_RETURN(std::unique_ptr<OutputParser> parser, OutputParser::create(options));
  parser->feed(output);
  parser->finish();
  return parser->message();
}

}  // namespace helium
