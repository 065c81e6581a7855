// server/api_adapter.h — the seam between the HTTP server and each API it speaks (OpenAI Chat
// Completions, OpenAI Completions, OpenAI Responses, Anthropic Messages): an adapter turns a request
// body into a ParsedRequest, and turns the engine's output (parser events, then a Completion) into that
// API's stream events or response body.
// Owns: the types that cross the seam and the event-to-block tracking all stream writers share (the one
// place parser events are interpreted). Must not: do HTTP, render prompts or run generation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output_parser.h"
#include "server/api_error.h"
#include "server/conversation.h"
#include "server/json_fields.h"

namespace helium::server {

enum class RequestKind {
  kChat,         // a conversation to render with the chat template
  kCompletion,   // a raw prompt (text or token ids)
  kCountTokens,  // a conversation to render and count, no generation
};

struct ParsedRequest {
  RequestKind kind = RequestKind::kChat;
  Conversation conversation;  // kChat, kCountTokens
  std::string prompt_text;    // kCompletion with a text prompt
  std::vector<int32_t> prompt_tokens;  // kCompletion with token ids
  bool prompt_is_tokens = false;
  bool echo = false;  // completions: the response text starts with the prompt
  GenerationSettings settings;
  // Used when the request names no token limit (completions: 16, as OpenAI); unset: the room left in the
  // context, at most ServerOptions::default_max_tokens.
  std::optional<int64_t> default_max_tokens;
  bool stream = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
  // Responses: request fields its response object repeats (instructions, tools, tool_choice, ...).
  Json response_echo = Json::object();
  std::string tool_call_id_prefix = "call_";
};

// What the adapters need to know about the served model while parsing.
struct ParseContext {
  int64_t vocab_size = 0;
};

enum class FinishReason {
  kStop,          // end of turn (an end-of-sequence token)
  kStopSequence,  // a stop string of the request
  kLength,        // the token limit or the end of the context
  kToolCalls,     // ended after tool calls
  kCancelled,     // cancelled (shutdown)
};

// How a generation ended, with its usage: what the final stream events and the response body report.
struct Completion {
  FinishReason reason = FinishReason::kStop;
  std::string stop_sequence;  // kStopSequence
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens served from the prompt cache
  int completion_tokens = 0;
  int reasoning_tokens = 0;  // of completion_tokens, those spent on reasoning
  ParsedMessage message;     // text, reasoning and tool calls (completions: text only)
};

// Facts every response of one request shares.
struct ResponseContext {
  std::string model;  // the served name
  int64_t created_unix = 0;
  uint64_t id_seed = 0;  // per response; ids derive from it
  int prompt_tokens = 0;  // known before generation starts (the cached share only at its end)
  const ParsedRequest* request = nullptr;
};

// `prefix` + 24 base62 characters derived from (seed, salt).
std::string make_response_id(std::string_view prefix, uint64_t seed, uint64_t salt = 0);
// A fresh random seed per response (ids, and the sampling seed when the request gives none).
uint64_t random_seed();

// "data: <json>\n\n", with "event: <name>\n" first when `event` is not empty.
std::string sse_event(std::string_view event, const Json& data);

// Turns one response's parser events into an API's server-sent events. The base class tracks which
// content block is open (text, reasoning, or one tool call) and calls the hooks in order: a block is
// opened by its first event, takes deltas, and is closed when another block starts or the output ends.
class StreamWriter {
 public:
  explicit StreamWriter(ResponseContext context) : context_(std::move(context)) {}
  virtual ~StreamWriter() = default;

  // What is sent before any token (message_start, response.created, the role chunk, ...).
  std::string start();
  std::string write(const std::vector<ParserEvent>& events);
  // Closes the open block and writes the final events (stop reason, usage, terminator).
  std::string finish(const Completion& completion);
  // A failure once the stream has begun: written as the API's in-stream error.
  std::string fail(const ApiError& error);
  // Sent while nothing else is, so that a vanished client is noticed (writes to it fail).
  virtual std::string heartbeat() { return ": keep-alive\n\n"; }

 protected:
  enum class Block { kNone, kText, kReasoning, kToolCall };
  virtual void write_start() = 0;
  // `first` is the event that opens the block (for a tool call: kToolCallBegin with id and name).
  virtual void open_block(Block block, const ParserEvent& first) = 0;
  virtual void block_delta(Block block, const std::string& delta) = 0;
  virtual void close_block(Block block) = 0;
  virtual void write_finish(const Completion& completion) = 0;
  virtual void write_failure(const ApiError& error) = 0;

  void emit(std::string_view event, const Json& data) { out_ += sse_event(event, data); }
  void emit_raw(std::string_view text) { out_ += text; }
  const ResponseContext& context() const { return context_; }
  // What the hooks emitted since the last call (for writers that build their own heartbeat).
  std::string take_events() { return take(); }
  // How OpenAI streams (chat and legacy completions) end: the chunk with the finish reason; when the
  // request asked for usage, `usage_chunk` with empty choices and `usage`; then [DONE]. A failure: the
  // error object, then [DONE].
  void end_openai_stream(const Json& finish_chunk, Json usage_chunk, Json usage);
  void fail_openai_stream(const ApiError& error);

 private:
  std::string take() {
    std::string s;
    s.swap(out_);
    return s;
  }
  void close_open_block();

  ResponseContext context_;
  std::string out_;
  Block open_ = Block::kNone;
};

class ApiAdapter {
 public:
  virtual ~ApiAdapter() = default;
  virtual ApiFlavor flavor() const = 0;
  virtual std::string_view name() const = 0;  // for logs
  // Errors name the offending field; every one is a 400 invalid_request_error.
  virtual Result<ParsedRequest> parse(const Json& body, const ParseContext& context) const = 0;
  virtual std::unique_ptr<StreamWriter> make_stream_writer(const ResponseContext& context) const = 0;
  virtual Json make_response(const ResponseContext& context, const Completion& completion) const = 0;
};

std::unique_ptr<ApiAdapter> make_openai_chat_adapter();
std::unique_ptr<ApiAdapter> make_openai_completions_adapter();
std::unique_ptr<ApiAdapter> make_openai_responses_adapter();
std::unique_ptr<ApiAdapter> make_anthropic_messages_adapter();
std::unique_ptr<ApiAdapter> make_anthropic_count_tokens_adapter();

// Shared request parsing (request_fields.cpp).
// temperature, top_p, top_k, min_p, repetition_penalty, presence/frequency penalties, seed.
Status read_sampling_fields(const FieldReader& fields, GenerationSettings& settings);
// `stop` as a string or an array of strings (empty strings are dropped).
Status read_stop_field(const FieldReader& fields, std::string_view key, std::vector<std::string>& stop);
// OpenAI logit_bias: {"token id": bias in [-100, 100]}.
Status read_logit_bias(const FieldReader& fields, int64_t vocab_size, GenerationSettings& settings);
// OpenAI response_format / Responses text.format: {"type": "text" | "json_object" | "json_schema", ...}
// into a system-prompt instruction (empty for text). Errors name `path`.
Result<std::string> output_instruction_for_format(const Json& format, const std::string& path, bool responses_shape);
// Flattens OpenAI content: a string, or an array of parts whose text parts are joined. Image, audio and
// file parts become a placeholder saying the model takes text only.
Result<std::string> read_text_content(const Json& content, const std::string& path);

}  // namespace helium::server
