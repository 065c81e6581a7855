// server/anthropic_messages.cpp — Anthropic Messages (POST /v1/messages and /v1/messages/count_tokens),
// as Claude Code and the `@anthropic-ai/sdk` speak it: system as a string or blocks, tool_use /
// tool_result / thinking blocks, stop_sequences, thinking settings, and the message_start ...
// message_stop event stream.
// Owns: that API's request fields and response shapes, and dropping Claude Code's per-request
// attribution block from the system prompt (it changes on every request and would defeat the prompt
// cache). Must not: render prompts or run generation.
#include <limits>

#include "server/api_adapter.h"

namespace helium::server {
namespace {

constexpr std::string_view kBillingHeaderPrefix = "x-anthropic-billing-header";

std::string stop_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "max_tokens";
    case FinishReason::kToolCalls: return "tool_use";
    case FinishReason::kStopSequence: return "stop_sequence";
    default: return "end_turn";
  }
}

// Anthropic counts input in three parts that sum to the prompt: fresh (input_tokens), read from the
// cache, and written to a cache; helium's prompt cache keeps every prompt, so nothing is "written" in
// Anthropic's sense.
Json anthropic_usage(const Completion& c) {
  return {{"input_tokens", c.prompt_tokens - c.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", c.cached_tokens},
          {"output_tokens", c.completion_tokens}};
}

// An opaque signature for thinking blocks: clients send it back with the block, and helium ignores it.
std::string thinking_signature(uint64_t seed) { return make_response_id("helium-thinking-", seed, 7); }

Result<std::string> read_system(const Json& system, const std::string& path) {
  if (system.is_string()) {
    std::string text = system.get<std::string>();
    if (std::string_view(text).substr(0, kBillingHeaderPrefix.size()) == kBillingHeaderPrefix) {
      const size_t eol = text.find('\n');
      text = eol == std::string::npos ? std::string() : text.substr(eol + 1);
    }
    return text;
  }
  if (!system.is_array()) return Status::error(std::string("`") + path + "` must be a string or an array of text blocks, not " + json_type_phrase(system));
  std::string text;
  for (size_t i = 0; i < system.size(); ++i) {
    const std::string block_path = index_path(path, i);
    if (!system[i].is_object()) return Status::error(std::string("`") + block_path + "` must be a text block object");
    FieldReader b(system[i], block_path);
    HELIUM_ASSIGN_OR_RETURN(auto t, b.string("text"));
    if (!t) return b.missing("text");
    if (std::string_view(*t).substr(0, kBillingHeaderPrefix.size()) == kBillingHeaderPrefix) continue;
    if (!text.empty()) text += "\n\n";
    text += *t;
  }
  return text;
}

// tool_result content: a string, or blocks of text (and images, which this text-only server replaces).
Result<std::string> read_tool_result_content(const Json& content, const std::string& path) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Status::error(std::string("`") + path + "` must be a string or an array of blocks, not " + json_type_phrase(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    if (!block.is_object()) return Status::error(std::string("`") + index_path(path, i) + "` must be a block object");
    const std::string type = block.value("type", "");
    if (type == "text") {
      if (!text.empty()) text += "\n";
      text += block.value("text", "");
    } else if (type == "image" || type == "document") {
      if (!text.empty()) text += "\n";
      text += std::string("[") + type + " omitted: this model takes text only]";
    }
  }
  return text;
}

// One Anthropic message becomes one or more chat messages: a user message's tool_result blocks become
// tool messages (first, as Anthropic requires them to lead), its other text one user message.
Status read_message(const Json& m, const std::string& path, std::vector<ChatMessage>& out) {
  if (!m.is_object()) return Status::error(std::string("`") + path + "` must be a message object, not " + json_type_phrase(m));
  FieldReader f(m, path);
  HELIUM_ASSIGN_OR_RETURN(auto role, f.string("role"));
  if (!role) return f.missing("role");
  if (*role != "user" && *role != "assistant" && *role != "system")
    return Status::error(std::string("`") + f.path("role") + "` must be \"user\", \"assistant\" or \"system\", not \"" + *role + "\"");
  const Json* content = f.find("content");
  if (!content) return f.missing("content");
  // A system message among the others applies from where it stands (Claude Code 2.1 sends its
  // environment this way, after the user turn); it keeps its place. Its content is read as the top-level
  // system field is (a string or text blocks, the attribution block dropped).
  if (*role == "system") {
    HELIUM_ASSIGN_OR_RETURN(std::string text, read_system(*content, f.path("content")));
    out.push_back({"system", std::move(text), {}, {}, {}, {}});
    return Status::ok();
  }
  ChatMessage message;
  message.role = *role;
  if (content->is_string()) {
    message.content = content->get<std::string>();
    out.push_back(std::move(message));
    return Status::ok();
  }
  if (!content->is_array()) return f.wrong_type("content", "a string or an array of content blocks");
  std::vector<ChatMessage> tool_results;
  for (size_t i = 0; i < content->size(); ++i) {
    const std::string block_path = index_path(f.path("content"), i);
    const Json& block = (*content)[i];
    if (!block.is_object()) return Status::error(std::string("`") + block_path + "` must be a content block object, not " + json_type_phrase(block));
    FieldReader b(block, block_path);
    HELIUM_ASSIGN_OR_RETURN(auto type, b.string("type"));
    if (!type) return b.missing("type");
    if (*type == "text") {
      HELIUM_ASSIGN_OR_RETURN(auto text, b.string("text"));
      if (!text) return b.missing("text");
      message.content += *text;
    } else if (*type == "image" || *type == "document") {
      message.content += std::string("[") + *type + " omitted: this model takes text only]";
    } else if (*type == "thinking" && *role == "assistant") {
      HELIUM_ASSIGN_OR_RETURN(auto thinking, b.string("thinking"));
      message.reasoning += thinking.value_or("");
    } else if (*type == "tool_use" && *role == "assistant") {
      HELIUM_ASSIGN_OR_RETURN(auto id, b.string("id"));
      HELIUM_ASSIGN_OR_RETURN(auto name, b.string("name"));
      if (!id) return b.missing("id");
      if (!name) return b.missing("name");
      const Json* input = b.find("input");
      if (input && !input->is_object()) return b.wrong_type("input", "an object");
      message.tool_calls.push_back({*id, *name, input ? dump_json(*input) : "{}"});
    } else if (*type == "tool_result" && *role == "user") {
      HELIUM_ASSIGN_OR_RETURN(auto id, b.string("tool_use_id"));
      if (!id) return b.missing("tool_use_id");
      HELIUM_ASSIGN_OR_RETURN(auto is_error, b.boolean("is_error"));
      const Json null_content;
      const Json* result = b.find("content");
      HELIUM_ASSIGN_OR_RETURN(std::string text, read_tool_result_content(result ? *result : null_content, b.path("content")));
      ChatMessage tool;
      tool.role = "tool";
      tool.tool_call_id = *id;
      tool.content = is_error.value_or(false) ? "Error: " + text : text;
      tool_results.push_back(std::move(tool));
    }
    // Other blocks (redacted_thinking, server tool results, citations, ...) carry nothing this
    // text-only model can use; they are skipped rather than refused.
  }
  out.insert(out.end(), std::make_move_iterator(tool_results.begin()), std::make_move_iterator(tool_results.end()));
  if (*role == "assistant" || !message.content.empty() || tool_results.empty()) out.push_back(std::move(message));
  return Status::ok();
}

Status read_tools(const FieldReader& f, Conversation& c) {
  HELIUM_ASSIGN_OR_RETURN(const Json* tools, f.array("tools"));
  if (tools) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string path = index_path("tools", i);
      if (!(*tools)[i].is_object()) return Status::error(std::string("`") + path + "` must be an object");
      FieldReader t((*tools)[i], path);
      HELIUM_ASSIGN_OR_RETURN(auto type, t.string("type"));
      // Typed tools other than "custom" are Anthropic's server tools (web_search_..., code_execution_...)
      // or versioned client tools with a built-in schema; this server cannot run or describe them.
      if (type && *type != "custom") continue;
      HELIUM_ASSIGN_OR_RETURN(auto name, t.string("name"));
      if (!name || name->empty()) return t.missing("name");
      HELIUM_ASSIGN_OR_RETURN(auto description, t.string("description"));
      HELIUM_ASSIGN_OR_RETURN(const Json* schema, t.object("input_schema"));
      ToolDefinition def;
      def.name = *name;
      def.description = description.value_or("");
      if (schema) def.parameters = *schema;
      c.tools.push_back(std::move(def));
    }
  }
  HELIUM_ASSIGN_OR_RETURN(const Json* choice, f.object("tool_choice"));
  if (choice) {
    FieldReader tc(*choice, "tool_choice");
    HELIUM_ASSIGN_OR_RETURN(auto type, tc.string("type"));
    if (!type) return tc.missing("type");
    if (*type == "auto") {
      c.tool_choice.mode = ToolChoiceMode::kAuto;
    } else if (*type == "any") {
      c.tool_choice.mode = ToolChoiceMode::kRequired;
    } else if (*type == "none") {
      c.tool_choice.mode = ToolChoiceMode::kNone;
    } else if (*type == "tool") {
      HELIUM_ASSIGN_OR_RETURN(auto name, tc.string("name"));
      if (!name) return tc.missing("name");
      c.tool_choice = {ToolChoiceMode::kNamed, *name};
    } else {
      return Status::error("`tool_choice.type` must be auto, any, tool or none, not \"" + *type + "\"");
    }
  }
  return Status::ok();
}

class MessagesStreamWriter final : public StreamWriter {
 public:
  MessagesStreamWriter(const ResponseContext& context, int prompt_tokens)
      : StreamWriter(context), id_(make_response_id("msg_", context.id_seed)), prompt_tokens_(prompt_tokens) {}

  std::string heartbeat() override { return sse_event("ping", {{"type", "ping"}}); }

 private:
  void write_start() override {
    // The prompt cache's share is known only when generation ends: message_start counts the whole prompt
    // as input, and message_delta's cumulative usage gives the split.
    emit("message_start",
         {{"type", "message_start"},
          {"message",
           {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", context().model},
            {"content", Json::array()},
            {"stop_reason", nullptr},
            {"stop_sequence", nullptr},
            {"usage",
             {{"input_tokens", prompt_tokens_},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", 0},
              {"output_tokens", 0}}}}}});
    emit("ping", {{"type", "ping"}});
  }
  void open_block(Block block, const ParserEvent& first) override {
    Json content_block;
    if (block == Block::kText) content_block = {{"type", "text"}, {"text", ""}};
    else if (block == Block::kReasoning) content_block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    else content_block = {{"type", "tool_use"}, {"id", first.tool_id}, {"name", first.tool_name}, {"input", Json::object()}};
    input_sent_ = false;
    emit("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", content_block}});
  }
  void block_delta(Block block, const std::string& delta) override {
    Json d;
    if (block == Block::kText) d = {{"type", "text_delta"}, {"text", delta}};
    else if (block == Block::kReasoning) d = {{"type", "thinking_delta"}, {"thinking", delta}};
    else {
      d = {{"type", "input_json_delta"}, {"partial_json", delta}};
      input_sent_ = true;
    }
    emit("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  }
  void close_block(Block block) override {
    if (block == Block::kReasoning)
      emit("content_block_delta",
           {{"type", "content_block_delta"},
            {"index", index_},
            {"delta", {{"type", "signature_delta"}, {"signature", thinking_signature(context().id_seed + index_)}}}});
    // Clients take a tool_use without any input_json_delta as input {} and some reject it: send one.
    if (block == Block::kToolCall && !input_sent_)
      emit("content_block_delta", {{"type", "content_block_delta"},
                                   {"index", index_},
                                   {"delta", {{"type", "input_json_delta"}, {"partial_json", "{}"}}}});
    emit("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    ++index_;
  }
  void write_finish(const Completion& c) override {
    emit("message_delta",
         {{"type", "message_delta"},
          {"delta",
           {{"stop_reason", stop_reason_name(c.reason)},
            {"stop_sequence", c.reason == FinishReason::kStopSequence ? Json(c.stop_sequence) : Json()}}},
          {"usage", anthropic_usage(c)}});
    emit("message_stop", {{"type", "message_stop"}});
  }
  void write_failure(const ApiError& error) override { emit("error", error.body(ApiFlavor::kAnthropic)); }

  std::string id_;
  int prompt_tokens_ = 0;
  int index_ = 0;
  bool input_sent_ = false;
};

class AnthropicMessagesAdapter final : public ApiAdapter {
 public:
  explicit AnthropicMessagesAdapter(bool count_tokens) : count_tokens_(count_tokens) {}
  ApiFlavor flavor() const override { return ApiFlavor::kAnthropic; }
  std::string_view name() const override { return count_tokens_ ? "messages.count_tokens" : "messages"; }

  Result<ParsedRequest> parse(const Json& body, const ParseContext&) const override {
    if (!body.is_object()) return Status::error("the request body must be a JSON object, not " + json_type_phrase(body));
    FieldReader f(body, "");
    ParsedRequest r;
    r.kind = count_tokens_ ? RequestKind::kCountTokens : RequestKind::kChat;
    r.tool_call_id_prefix = "toolu_";
    HELIUM_ASSIGN_OR_RETURN(auto model, f.string("model"));
    (void)model;  // claude-haiku-*, claude-sonnet-*, ...: every name is served by the one model
    HELIUM_ASSIGN_OR_RETURN(auto max_tokens, f.integer("max_tokens", 1, std::numeric_limits<int32_t>::max()));
    if (!max_tokens && !count_tokens_) return f.missing("max_tokens");
    r.settings.max_tokens = max_tokens;
    if (const Json* system = f.find("system")) {
      HELIUM_ASSIGN_OR_RETURN(std::string text, read_system(*system, "system"));
      if (!text.empty()) r.conversation.messages.push_back({"system", text, {}, {}, {}, {}});
    }
    HELIUM_ASSIGN_OR_RETURN(const Json* messages, f.array("messages"));
    if (!messages) return f.missing("messages");
    if (messages->empty()) return Status::error("`messages` must hold at least one message");
    for (size_t i = 0; i < messages->size(); ++i)
      HELIUM_RETURN_IF_ERROR(read_message((*messages)[i], index_path("messages", i), r.conversation.messages));
    HELIUM_RETURN_IF_ERROR(read_tools(f, r.conversation));
    HELIUM_RETURN_IF_ERROR(read_stop_field(f, "stop_sequences", r.settings.stop));
    HELIUM_RETURN_IF_ERROR(read_sampling_fields(f, r.settings));
    HELIUM_ASSIGN_OR_RETURN(auto stream, f.boolean("stream"));
    r.stream = stream.value_or(false) && !count_tokens_;
    HELIUM_ASSIGN_OR_RETURN(const Json* thinking, f.object("thinking"));
    if (thinking) {
      FieldReader t(*thinking, "thinking");
      HELIUM_ASSIGN_OR_RETURN(auto type, t.string("type"));
      if (!type) return t.missing("type");
      if (*type == "enabled" || *type == "adaptive") r.conversation.enable_thinking = true;
      else if (*type == "disabled") r.conversation.enable_thinking = false;
      else return Status::error("`thinking.type` must be enabled, adaptive or disabled, not \"" + *type + "\"");
    }
    // Structured outputs: `output_format` (beta) or `output_config.format`.
    const Json* format = f.find("output_format");
    std::string format_path = "output_format";
    HELIUM_ASSIGN_OR_RETURN(const Json* output_config, f.object("output_config"));
    if (!format && output_config) {
      format = FieldReader(*output_config, "output_config").find("format");
      format_path = "output_config.format";
    }
    if (format) {
      HELIUM_ASSIGN_OR_RETURN(r.conversation.output_instruction,
                              output_instruction_for_format(*format, format_path, /*responses_shape=*/true));
    }
    return r;
  }

  std::unique_ptr<StreamWriter> make_stream_writer(const ResponseContext& context) const override {
    return std::make_unique<MessagesStreamWriter>(context, context.prompt_tokens);
  }

  Json make_response(const ResponseContext& context, const Completion& c) const override {
    Json content = Json::array();
    if (!c.message.reasoning.empty())
      content.push_back({{"type", "thinking"}, {"thinking", c.message.reasoning}, {"signature", thinking_signature(context.id_seed)}});
    if (!c.message.text.empty() || c.message.tool_calls.empty()) content.push_back({{"type", "text"}, {"text", c.message.text}});
    for (const ToolCall& call : c.message.tool_calls) {
      Json input = Json::object();
      try {
        input = Json::parse(call.arguments);
      } catch (const Json::exception&) {
      }
      content.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}});
    }
    return {{"id", make_response_id("msg_", context.id_seed)},
            {"type", "message"},
            {"role", "assistant"},
            {"model", context.model},
            {"content", std::move(content)},
            {"stop_reason", stop_reason_name(c.reason)},
            {"stop_sequence", c.reason == FinishReason::kStopSequence ? Json(c.stop_sequence) : Json()},
            {"usage", anthropic_usage(c)}};
  }

 private:
  bool count_tokens_;
};

}  // namespace

std::unique_ptr<ApiAdapter> make_anthropic_messages_adapter() { return std::make_unique<AnthropicMessagesAdapter>(false); }
std::unique_ptr<ApiAdapter> make_anthropic_count_tokens_adapter() { return std::make_unique<AnthropicMessagesAdapter>(true); }

}  // namespace helium::server
