// server/openai_chat.cpp — OpenAI Chat Completions (POST /v1/chat/completions), as OpenCode, pi and the
// `openai` SDK speak it: messages with text parts, tool calls and tool results, tools and tool_choice,
// streaming chunks with delta.content / delta.reasoning_content / delta.tool_calls, and usage.
// Owns: that API's request fields and response shapes. Must not: render prompts or run generation.
#include <limits>

#include "server/api_adapter.h"

namespace helium::server {
namespace {

std::string chat_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kToolCalls: return "tool_calls";
    default: return "stop";
  }
}

Json chat_usage(const Completion& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", c.reasoning_tokens}}}};
}

Result<std::vector<ToolCallRecord>> read_tool_calls(const Json& calls, const std::string& path) {
  if (!calls.is_array()) return Status::error(std::string("`") + path + "` must be an array, not " + json_type_phrase(calls));
  std::vector<ToolCallRecord> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string call_path = index_path(path, i);
    if (!calls[i].is_object()) return Status::error(std::string("`") + call_path + "` must be an object");
    FieldReader call(calls[i], call_path);
    HELIUM_ASSIGN_OR_RETURN(auto id, call.string("id"));
    HELIUM_ASSIGN_OR_RETURN(const Json* function, call.object("function"));
    HELIUM_ASSIGN_OR_RETURN(const Json* custom, call.object("custom"));
    ToolCallRecord record;
    record.id = id.value_or("");
    if (function) {
      FieldReader fn(*function, call.path("function"));
      HELIUM_ASSIGN_OR_RETURN(auto name, fn.string("name"));
      if (!name) return fn.missing("name");
      record.name = *name;
      if (const Json* args = fn.find("arguments")) {
        // A string of JSON, as the API defines it; some clients send the object itself.
        record.arguments = args->is_string() ? args->get<std::string>() : dump_json(*args);
      }
    } else if (custom) {
      FieldReader cu(*custom, call.path("custom"));
      HELIUM_ASSIGN_OR_RETURN(auto name, cu.string("name"));
      HELIUM_ASSIGN_OR_RETURN(auto input, cu.string("input"));
      if (!name) return cu.missing("name");
      record.name = *name;
      record.arguments = dump_json(Json{{"input", input.value_or("")}});
    } else {
      return call.missing("function");
    }
    out.push_back(std::move(record));
  }
  return out;
}

Result<ChatMessage> read_chat_message(const Json& m, const std::string& path) {
  if (!m.is_object()) return Status::error(std::string("`") + path + "` must be a message object, not " + json_type_phrase(m));
  FieldReader f(m, path);
  HELIUM_ASSIGN_OR_RETURN(auto role, f.string("role"));
  if (!role) return f.missing("role");
  ChatMessage message;
  const Json null_content;
  const Json* content = f.find("content");
  HELIUM_ASSIGN_OR_RETURN(message.content, read_text_content(content ? *content : null_content, f.path("content")));
  if (*role == "system" || *role == "developer") {
    message.role = "system";
  } else if (*role == "user") {
    message.role = "user";
  } else if (*role == "assistant") {
    message.role = "assistant";
    // Replayed thinking: `reasoning_content` (llama.cpp / DeepSeek convention) or `reasoning`.
    for (const char* key : {"reasoning_content", "reasoning"}) {
      HELIUM_ASSIGN_OR_RETURN(auto reasoning, f.string(key));
      if (reasoning && message.reasoning.empty()) message.reasoning = *reasoning;
    }
    if (const Json* calls = f.find("tool_calls")) {
      HELIUM_ASSIGN_OR_RETURN(message.tool_calls, read_tool_calls(*calls, f.path("tool_calls")));
    }
    if (const Json* legacy = f.find("function_call")) {  // the pre-tools form
      HELIUM_ASSIGN_OR_RETURN(auto calls, read_tool_calls(Json::array({{{"function", *legacy}}}), f.path("function_call")));
      message.tool_calls.insert(message.tool_calls.end(), calls.begin(), calls.end());
    }
  } else if (*role == "tool" || *role == "function") {
    message.role = "tool";
    HELIUM_ASSIGN_OR_RETURN(auto call_id, f.string("tool_call_id"));
    HELIUM_ASSIGN_OR_RETURN(auto name, f.string("name"));
    message.tool_call_id = call_id.value_or("");
    message.name = name.value_or("");
  } else {
    return Status::error(std::string("`") + f.path("role") + "` must be one of system, developer, user, assistant, tool; not \"" +
                         *role + "\"");
  }
  return message;
}

Status read_chat_tools(const FieldReader& f, Conversation& c) {
  HELIUM_ASSIGN_OR_RETURN(const Json* tools, f.array("tools"));
  if (tools) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string path = index_path(f.path("tools"), i);
      const Json& tool = (*tools)[i];
      if (!tool.is_object()) return Status::error(std::string("`") + path + "` must be an object");
      FieldReader t(tool, path);
      HELIUM_ASSIGN_OR_RETURN(auto type, t.string("type"));
      ToolDefinition def;
      if (!type || *type == "function") {
        HELIUM_ASSIGN_OR_RETURN(const Json* function, t.object("function"));
        if (!function) return t.missing("function");
        FieldReader fn(*function, t.path("function"));
        HELIUM_ASSIGN_OR_RETURN(auto name, fn.string("name"));
        if (!name || name->empty()) return fn.missing("name");
        HELIUM_ASSIGN_OR_RETURN(auto description, fn.string("description"));
        HELIUM_ASSIGN_OR_RETURN(const Json* parameters, fn.object("parameters"));
        def.name = *name;
        def.description = description.value_or("");
        if (parameters) def.parameters = *parameters;
      } else if (*type == "custom") {
        HELIUM_ASSIGN_OR_RETURN(const Json* custom, t.object("custom"));
        if (!custom) return t.missing("custom");
        FieldReader cu(*custom, t.path("custom"));
        HELIUM_ASSIGN_OR_RETURN(auto name, cu.string("name"));
        if (!name || name->empty()) return cu.missing("name");
        HELIUM_ASSIGN_OR_RETURN(auto description, cu.string("description"));
        def.name = *name;
        def.description = description.value_or("");
        def.kind = ToolKind::kCustom;
        def.parameters = {{"type", "object"},
                          {"properties", {{"input", {{"type", "string"}, {"description", "The tool's input text"}}}}},
                          {"required", {"input"}}};
      } else {
        continue;  // a tool type the model cannot call is ignored, never an error
      }
      c.tools.push_back(std::move(def));
    }
  }
  if (const Json* choice = f.find("tool_choice")) {
    if (choice->is_string()) {
      const std::string& mode = choice->get_ref<const std::string&>();
      if (mode == "none") c.tool_choice.mode = ToolChoiceMode::kNone;
      else if (mode == "required") c.tool_choice.mode = ToolChoiceMode::kRequired;
      else if (mode == "auto") c.tool_choice.mode = ToolChoiceMode::kAuto;
      else return Status::error("`tool_choice` must be \"none\", \"auto\", \"required\" or an object, not \"" + mode + "\"");
    } else if (choice->is_object()) {
      // {"type":"function","function":{"name"}} or {"type":"custom","custom":{"name"}}; other forms
      // (allowed_tools) leave the choice to the model.
      for (const char* key : {"function", "custom"}) {
        auto it = choice->find(key);
        if (it != choice->end() && it->is_object() && it->contains("name") && (*it)["name"].is_string()) {
          c.tool_choice.mode = ToolChoiceMode::kNamed;
          c.tool_choice.name = (*it)["name"].get<std::string>();
        }
      }
    } else {
      return f.wrong_type("tool_choice", "a string or an object");
    }
  }
  return Status::ok();
}

class ChatStreamWriter final : public StreamWriter {
 public:
  ChatStreamWriter(const ResponseContext& context)
      : StreamWriter(context), id_(make_response_id("chatcmpl-", context.id_seed)) {}

 private:
  Json chunk(Json delta, Json finish_reason = nullptr) const {
    return {{"id", id_},
            {"object", "chat.completion.chunk"},
            {"created", context().created_unix},
            {"model", context().model},
            {"system_fingerprint", "helium"},
            {"choices",
             {{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", std::move(finish_reason)}}}}};
  }
  void write_start() override { emit("", chunk({{"role", "assistant"}, {"content", ""}})); }
  void open_block(Block block, const ParserEvent& first) override {
    if (block != Block::kToolCall) return;
    emit("", chunk({{"tool_calls",
                     {{{"index", first.tool_index},
                       {"id", first.tool_id},
                       {"type", "function"},
                       {"function", {{"name", first.tool_name}, {"arguments", ""}}}}}}}));
    tool_index_ = first.tool_index;
  }
  void block_delta(Block block, const std::string& delta) override {
    if (block == Block::kText) emit("", chunk({{"content", delta}}));
    else if (block == Block::kReasoning) emit("", chunk({{"reasoning_content", delta}}));
    else emit("", chunk({{"tool_calls", {{{"index", tool_index_}, {"function", {{"arguments", delta}}}}}}}));
  }
  void close_block(Block) override {}
  void write_finish(const Completion& c) override {
    end_openai_stream(chunk(Json::object(), chat_finish_reason(c.reason)), chunk(Json::object()), chat_usage(c));
  }
  void write_failure(const ApiError& error) override { fail_openai_stream(error); }

  std::string id_;
  int tool_index_ = 0;
};

class OpenAIChatAdapter final : public ApiAdapter {
 public:
  ApiFlavor flavor() const override { return ApiFlavor::kOpenAI; }
  std::string_view name() const override { return "chat.completions"; }

  Result<ParsedRequest> parse(const Json& body, const ParseContext& context) const override {
    if (!body.is_object()) return Status::error("the request body must be a JSON object, not " + json_type_phrase(body));
    FieldReader f(body, "");
    ParsedRequest r;
    r.kind = RequestKind::kChat;
    HELIUM_ASSIGN_OR_RETURN(auto model, f.string("model"));
    (void)model;  // any name is served by the one model
    HELIUM_ASSIGN_OR_RETURN(const Json* messages, f.array("messages"));
    if (!messages) return f.missing("messages");
    if (messages->empty()) return Status::error("`messages` must hold at least one message");
    for (size_t i = 0; i < messages->size(); ++i) {
      HELIUM_ASSIGN_OR_RETURN(ChatMessage m, read_chat_message((*messages)[i], index_path("messages", i)));
      r.conversation.messages.push_back(std::move(m));
    }
    HELIUM_RETURN_IF_ERROR(read_chat_tools(f, r.conversation));
    HELIUM_ASSIGN_OR_RETURN(auto stream, f.boolean("stream"));
    r.stream = stream.value_or(false);
    HELIUM_ASSIGN_OR_RETURN(const Json* stream_options, f.object("stream_options"));
    if (stream_options) {
      FieldReader so(*stream_options, "stream_options");
      HELIUM_ASSIGN_OR_RETURN(auto include_usage, so.boolean("include_usage"));
      r.include_usage = include_usage.value_or(false);
    }
    HELIUM_ASSIGN_OR_RETURN(auto n, f.integer("n", 1, 128));
    if (n && *n != 1) return Status::error("`n` must be 1: one choice per request is supported");
    constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
    HELIUM_ASSIGN_OR_RETURN(auto max_completion_tokens, f.integer("max_completion_tokens", 1, kMaxTokens));
    HELIUM_ASSIGN_OR_RETURN(auto max_tokens, f.integer("max_tokens", 1, kMaxTokens));
    r.settings.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
    HELIUM_RETURN_IF_ERROR(read_sampling_fields(f, r.settings));
    HELIUM_RETURN_IF_ERROR(read_stop_field(f, "stop", r.settings.stop));
    HELIUM_RETURN_IF_ERROR(read_logit_bias(f, context.vocab_size, r.settings));
    if (const Json* format = f.find("response_format")) {
      HELIUM_ASSIGN_OR_RETURN(r.conversation.output_instruction,
                              output_instruction_for_format(*format, "response_format", /*responses_shape=*/false));
    }
    HELIUM_ASSIGN_OR_RETURN(auto effort, f.string("reasoning_effort"));
    if (effort && (*effort == "none" || *effort == "minimal")) r.conversation.enable_thinking = false;
    HELIUM_ASSIGN_OR_RETURN(const Json* kwargs, f.object("chat_template_kwargs"));
    if (kwargs) r.conversation.template_kwargs = *kwargs;
    return r;
  }

  std::unique_ptr<StreamWriter> make_stream_writer(const ResponseContext& context) const override {
    return std::make_unique<ChatStreamWriter>(context);
  }

  Json make_response(const ResponseContext& context, const Completion& c) const override {
    Json message = {{"role", "assistant"}, {"content", nullptr}, {"refusal", nullptr}};
    if (!c.message.text.empty() || c.message.tool_calls.empty()) message["content"] = c.message.text;
    if (!c.message.reasoning.empty()) message["reasoning_content"] = c.message.reasoning;
    if (!c.message.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCall& call : c.message.tool_calls)
        calls.push_back({{"id", call.id},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      message["tool_calls"] = std::move(calls);
    }
    return {{"id", make_response_id("chatcmpl-", context.id_seed)},
            {"object", "chat.completion"},
            {"created", context.created_unix},
            {"model", context.model},
            {"system_fingerprint", "helium"},
            {"choices",
             {{{"index", 0}, {"message", std::move(message)}, {"logprobs", nullptr},
               {"finish_reason", chat_finish_reason(c.reason)}}}},
            {"usage", chat_usage(c)}};
  }
};

}  // namespace

std::unique_ptr<ApiAdapter> make_openai_chat_adapter() { return std::make_unique<OpenAIChatAdapter>(); }

}  // namespace helium::server
