// server/openai_responses.cpp — OpenAI Responses (POST /v1/responses), as Codex and the `openai` SDK
// speak it: `input` as a string or items (messages, function_call, function_call_output,
// custom_tool_call[_output]; reasoning and other item types ignored), `instructions`, tools of type
// function, namespace (flattened to its functions) and custom (a function of one string `input`), other
// tool types ignored; and the response.* event stream with sequence numbers.
// Owns: that API's request fields, the flattening of tool names and the response shapes. Must not:
// render prompts or run generation. Stateless: every request carries its whole conversation.
#include <limits>

#include "server/api_adapter.h"

namespace helium::server {
namespace {

// The name the model sees for a tool in a namespace: Codex's MCP namespaces already end in "__"
// ("mcp__server__"), others get the separator.
std::string flattened_name(const std::string& ns, const std::string& name) {
  if (ns.empty()) return name;
  if (ns.size() >= 2 && ns.compare(ns.size() - 2, 2, "__") == 0) return ns + name;
  return ns + "__" + name;
}

Json custom_tool_parameters() {
  return {{"type", "object"},
          {"properties", {{"input", {{"type", "string"}, {"description", "The tool's input, as free text"}}}}},
          {"required", {"input"}}};
}

Status read_function_tool(const FieldReader& t, const std::string& ns, Conversation& c) {
  HELIUM_ASSIGN_OR_RETURN(auto name, t.string("name"));
  if (!name || name->empty()) return t.missing("name");
  HELIUM_ASSIGN_OR_RETURN(auto description, t.string("description"));
  HELIUM_ASSIGN_OR_RETURN(const Json* parameters, t.object("parameters"));
  ToolDefinition def;
  def.name = flattened_name(ns, *name);
  def.description = description.value_or("");
  if (parameters) def.parameters = *parameters;
  def.client_name = *name;
  def.client_namespace = ns;
  c.tools.push_back(std::move(def));
  return Status::ok();
}

Status read_custom_tool(const FieldReader& t, const std::string& ns, Conversation& c) {
  HELIUM_ASSIGN_OR_RETURN(auto name, t.string("name"));
  if (!name || name->empty()) return t.missing("name");
  HELIUM_ASSIGN_OR_RETURN(auto description, t.string("description"));
  ToolDefinition def;
  def.name = flattened_name(ns, *name);
  def.description = description.value_or("");
  // A grammar (e.g. Codex's apply_patch in Lark) cannot be enforced here; the description carries it so
  // the model knows the expected syntax.
  if (const Json* format = t.find("format"); format && format->is_object() && format->contains("definition") &&
                                             (*format)["definition"].is_string()) {
    if (!def.description.empty()) def.description += "\n\n";
    def.description += "The input must follow this grammar:\n" + (*format)["definition"].get<std::string>();
  }
  def.parameters = custom_tool_parameters();
  def.kind = ToolKind::kCustom;
  def.client_name = *name;
  def.client_namespace = ns;
  c.tools.push_back(std::move(def));
  return Status::ok();
}

Status read_tools(const FieldReader& f, Conversation& c) {
  HELIUM_ASSIGN_OR_RETURN(const Json* tools, f.array("tools"));
  if (!tools) return Status::ok();
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string path = index_path("tools", i);
    if (!(*tools)[i].is_object()) return Status::error(std::string("`") + path + "` must be an object");
    FieldReader t((*tools)[i], path);
    HELIUM_ASSIGN_OR_RETURN(auto type, t.string("type"));
    if (!type) return t.missing("type");
    if (*type == "function") {
      HELIUM_RETURN_IF_ERROR(read_function_tool(t, "", c));
    } else if (*type == "custom") {
      HELIUM_RETURN_IF_ERROR(read_custom_tool(t, "", c));
    } else if (*type == "namespace") {
      HELIUM_ASSIGN_OR_RETURN(auto ns, t.string("name"));
      if (!ns || ns->empty()) return t.missing("name");
      HELIUM_ASSIGN_OR_RETURN(const Json* inner, t.array("tools"));
      if (!inner) continue;
      for (size_t j = 0; j < inner->size(); ++j) {
        const std::string inner_path = index_path(t.path("tools"), j);
        if (!(*inner)[j].is_object()) return Status::error(std::string("`") + inner_path + "` must be an object");
        FieldReader it((*inner)[j], inner_path);
        HELIUM_ASSIGN_OR_RETURN(auto inner_type, it.string("type"));
        if (!inner_type || *inner_type == "function") HELIUM_RETURN_IF_ERROR(read_function_tool(it, *ns, c));
        else if (*inner_type == "custom") HELIUM_RETURN_IF_ERROR(read_custom_tool(it, *ns, c));
      }
    }
    // web_search, image_generation, local_shell, tool_search, file_search, mcp, ...: hosted tools this
    // server cannot run. Ignored, never a 400 (Codex sends some of them by default).
  }
  return Status::ok();
}

Status read_tool_choice(const FieldReader& f, Conversation& c) {
  const Json* choice = f.find("tool_choice");
  if (!choice) return Status::ok();
  if (choice->is_string()) {
    const std::string& mode = choice->get_ref<const std::string&>();
    if (mode == "none") c.tool_choice.mode = ToolChoiceMode::kNone;
    else if (mode == "required") c.tool_choice.mode = ToolChoiceMode::kRequired;
    else if (mode == "auto") c.tool_choice.mode = ToolChoiceMode::kAuto;
    else return Status::error("`tool_choice` must be \"none\", \"auto\", \"required\" or an object, not \"" + mode + "\"");
    return Status::ok();
  }
  if (!choice->is_object()) return f.wrong_type("tool_choice", "a string or an object");
  const std::string type = choice->value("type", "");
  if ((type == "function" || type == "custom") && choice->contains("name") && (*choice)["name"].is_string()) {
    c.tool_choice.mode = ToolChoiceMode::kNamed;
    c.tool_choice.name = flattened_name(choice->value("namespace", ""), (*choice)["name"].get<std::string>());
  }
  return Status::ok();  // allowed_tools and hosted-tool choices: left to the model
}

// Appends a tool call to the assistant message it belongs to: the last message when it is an assistant
// message no tool result has answered yet, else a new one.
void add_tool_call(std::vector<ChatMessage>& messages, ToolCallRecord call) {
  if (messages.empty() || messages.back().role != "assistant") messages.push_back({"assistant", "", "", {}, "", ""});
  messages.back().tool_calls.push_back(std::move(call));
}

Result<std::string> read_output_field(const FieldReader& item) {
  const Json* output = item.find("output");
  if (!output) return std::string();
  if (output->is_string()) return output->get<std::string>();
  return read_text_content(*output, item.path("output"));
}

Status read_input_items(const Json& input, Conversation& c) {
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string path = index_path("input", i);
    const Json& item = input[i];
    if (!item.is_object()) return Status::error(std::string("`") + path + "` must be an input item object, not " + json_type_phrase(item));
    FieldReader f(item, path);
    HELIUM_ASSIGN_OR_RETURN(auto type, f.string("type"));
    const std::string kind = type.value_or("message");
    if (kind == "message") {
      HELIUM_ASSIGN_OR_RETURN(auto role, f.string("role"));
      if (!role) return f.missing("role");
      ChatMessage m;
      if (*role == "user") m.role = "user";
      else if (*role == "assistant") m.role = "assistant";
      else if (*role == "system" || *role == "developer") m.role = "system";
      else return Status::error(std::string("`") + f.path("role") + "` must be user, assistant, system or developer, not \"" + *role + "\"");
      const Json null_content;
      const Json* content = f.find("content");
      HELIUM_ASSIGN_OR_RETURN(m.content, read_text_content(content ? *content : null_content, f.path("content")));
      c.messages.push_back(std::move(m));
    } else if (kind == "function_call" || kind == "custom_tool_call") {
      HELIUM_ASSIGN_OR_RETURN(auto call_id, f.string("call_id"));
      HELIUM_ASSIGN_OR_RETURN(auto name, f.string("name"));
      HELIUM_ASSIGN_OR_RETURN(auto ns, f.string("namespace"));
      if (!call_id) return f.missing("call_id");
      if (!name) return f.missing("name");
      ToolCallRecord call{*call_id, flattened_name(ns.value_or(""), *name), "{}"};
      if (kind == "function_call") {
        HELIUM_ASSIGN_OR_RETURN(auto arguments, f.string("arguments"));
        call.arguments = arguments.value_or("{}");
      } else {
        HELIUM_ASSIGN_OR_RETURN(auto text, f.string("input"));
        call.arguments = dump_json(Json{{"input", text.value_or("")}});
      }
      add_tool_call(c.messages, std::move(call));
    } else if (kind == "function_call_output" || kind == "custom_tool_call_output") {
      HELIUM_ASSIGN_OR_RETURN(auto call_id, f.string("call_id"));
      if (!call_id) return f.missing("call_id");
      ChatMessage m;
      m.role = "tool";
      m.tool_call_id = *call_id;
      HELIUM_ASSIGN_OR_RETURN(m.content, read_output_field(f));
      c.messages.push_back(std::move(m));
    }
    // reasoning (encrypted or summarised thoughts), item_reference, web_search_call, local_shell_call,
    // compaction, ...: nothing a stateless text-only server can use. Ignored.
  }
  return Status::ok();
}

Json usage_json(const Completion& c) {
  return {{"input_tokens", c.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", c.cached_tokens}}},
          {"output_tokens", c.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", c.reasoning_tokens}}},
          {"total_tokens", c.prompt_tokens + c.completion_tokens}};
}

// The response object as created / in progress / completed / failed.
Json response_object(const ResponseContext& context, const std::string& status, Json output, Json usage,
                     Json error = nullptr, Json incomplete = nullptr) {
  Json r = {{"id", make_response_id("resp_", context.id_seed)},
            {"object", "response"},
            {"created_at", context.created_unix},
            {"status", status},
            {"error", std::move(error)},
            {"incomplete_details", std::move(incomplete)},
            {"model", context.model},
            {"output", std::move(output)},
            {"previous_response_id", nullptr},
            {"store", false},
            {"truncation", "disabled"},
            {"usage", std::move(usage)}};
  for (auto it = context.request->response_echo.begin(); it != context.request->response_echo.end(); ++it)
    r[it.key()] = it.value();
  return r;
}

// Output items built from the parsed message, for the non-streamed body.
Json output_items(const ResponseContext& context, const Completion& c);

// Item constructors shared by the stream and the body.
Json message_item(const std::string& id, const std::string& status, const std::string& text, bool with_content) {
  Json content = Json::array();
  if (with_content) content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}});
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

Json reasoning_item(const std::string& id, const std::string& text, bool with_content) {
  Json content = Json::array();
  if (with_content) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"id", id}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", std::move(content)}};
}

// A call item as the client named the tool: function_call (arguments JSON text) or custom_tool_call
// (its `input` string), with `namespace` for a namespaced tool.
Json call_item(const ResponseContext& context, const std::string& item_id, const std::string& status, const ToolCall& call) {
  const ToolDefinition* tool = find_tool(context.request->conversation.tools, call.name);
  Json item;
  if (tool && tool->kind == ToolKind::kCustom) {
    std::string input;
    try {
      Json args = Json::parse(call.arguments);
      if (args.is_object() && args.contains("input") && args["input"].is_string()) input = args["input"].get<std::string>();
      else input = call.arguments;
    } catch (const Json::exception&) {
      input = call.arguments;
    }
    item = {{"id", item_id}, {"type", "custom_tool_call"}, {"status", status}, {"call_id", call.id},
            {"name", tool->client_name}, {"input", input}};
  } else {
    item = {{"id", item_id}, {"type", "function_call"}, {"status", status}, {"call_id", call.id},
            {"name", tool ? tool->client_name : call.name}, {"arguments", call.arguments}};
  }
  if (tool && !tool->client_namespace.empty()) item["namespace"] = tool->client_namespace;
  return item;
}

std::string item_id(const ResponseContext& context, std::string_view prefix, int output_index) {
  return make_response_id(prefix, context.id_seed, 100 + static_cast<uint64_t>(output_index));
}

Json output_items(const ResponseContext& context, const Completion& c) {
  Json output = Json::array();
  int index = 0;
  if (!c.message.reasoning.empty()) {
    output.push_back(reasoning_item(item_id(context, "rs_", index), c.message.reasoning, true));
    ++index;
  }
  if (!c.message.text.empty() || c.message.tool_calls.empty()) {
    output.push_back(message_item(item_id(context, "msg_", index), "completed", c.message.text, true));
    ++index;
  }
  for (const ToolCall& call : c.message.tool_calls) {
    output.push_back(call_item(context, item_id(context, "fc_", index), "completed", call));
    ++index;
  }
  return output;
}

std::pair<std::string, Json> completed_status(const Completion& c) {
  if (c.reason == FinishReason::kLength) return {"incomplete", Json{{"reason", "max_output_tokens"}}};
  return {"completed", nullptr};
}

class ResponsesStreamWriter final : public StreamWriter {
 public:
  explicit ResponsesStreamWriter(const ResponseContext& context) : StreamWriter(context) {}

  // An event rather than an SSE comment: Codex's idle timer counts events, and a long prefill must not
  // look like a dead stream. OpenAI sends the same `keepalive` event; SDKs skip it.
  std::string heartbeat() override {
    event("keepalive", Json::object());
    return take_events();
  }

 private:
  void event(const std::string& type, const Json& data) {
    Json e = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto it = data.begin(); it != data.end(); ++it) e[it.key()] = it.value();
    emit(type, e);
  }
  void write_start() override {
    event("response.created", {{"response", response_object(context(), "in_progress", Json::array(), nullptr)}});
    event("response.in_progress", {{"response", response_object(context(), "in_progress", Json::array(), nullptr)}});
  }
  void open_block(Block block, const ParserEvent& first) override {
    text_.clear();
    if (block == Block::kText) {
      id_ = item_id(context(), "msg_", output_index_);
      event("response.output_item.added", {{"output_index", output_index_}, {"item", message_item(id_, "in_progress", "", false)}});
      event("response.content_part.added",
            {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0},
             {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}, {"logprobs", Json::array()}}}});
    } else if (block == Block::kReasoning) {
      id_ = item_id(context(), "rs_", output_index_);
      event("response.output_item.added", {{"output_index", output_index_}, {"item", reasoning_item(id_, "", false)}});
      event("response.content_part.added", {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0},
                                            {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
    } else {
      id_ = item_id(context(), "fc_", output_index_);
      call_ = ToolCall{first.tool_id, first.tool_name, ""};
      const ToolDefinition* tool = find_tool(context().request->conversation.tools, call_.name);
      custom_ = tool && tool->kind == ToolKind::kCustom;
      event("response.output_item.added", {{"output_index", output_index_}, {"item", call_item(context(), id_, "in_progress", call_)}});
    }
  }
  void block_delta(Block block, const std::string& delta) override {
    text_ += delta;
    if (block == Block::kText) {
      event("response.output_text.delta", {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0},
                                           {"delta", delta}, {"logprobs", Json::array()}});
    } else if (block == Block::kReasoning) {
      event("response.reasoning_text.delta", {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0}, {"delta", delta}});
    } else if (!custom_) {
      event("response.function_call_arguments.delta", {{"item_id", id_}, {"output_index", output_index_}, {"delta", delta}});
    }
    // A custom tool's input is the `input` string inside the arguments: sent whole when the call ends.
  }
  void close_block(Block block) override {
    Json item;
    if (block == Block::kText) {
      event("response.output_text.done", {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0},
                                          {"text", text_}, {"logprobs", Json::array()}});
      event("response.content_part.done",
            {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0},
             {"part", {{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}, {"logprobs", Json::array()}}}});
      item = message_item(id_, "completed", text_, true);
    } else if (block == Block::kReasoning) {
      event("response.reasoning_text.done", {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0}, {"text", text_}});
      event("response.content_part.done", {{"item_id", id_}, {"output_index", output_index_}, {"content_index", 0},
                                           {"part", {{"type", "reasoning_text"}, {"text", text_}}}});
      item = reasoning_item(id_, text_, true);
    } else {
      call_.arguments = text_.empty() ? "{}" : text_;
      item = call_item(context(), id_, "completed", call_);
      if (custom_) {
        const std::string input = item["input"].get<std::string>();
        event("response.custom_tool_call_input.delta", {{"item_id", id_}, {"output_index", output_index_}, {"delta", input}});
        event("response.custom_tool_call_input.done", {{"item_id", id_}, {"output_index", output_index_}, {"input", input}});
      } else {
        event("response.function_call_arguments.done",
              {{"item_id", id_}, {"output_index", output_index_}, {"name", item["name"]}, {"arguments", call_.arguments}});
      }
    }
    event("response.output_item.done", {{"output_index", output_index_}, {"item", item}});
    output_.push_back(std::move(item));
    ++output_index_;
  }
  void write_finish(const Completion& c) override {
    auto [status, incomplete] = completed_status(c);
    // Always response.completed (with status "incomplete" when the token limit cut the output): Codex
    // treats a stream without response.completed as a transport failure and retries it.
    event("response.completed", {{"response", response_object(context(), status, output_, usage_json(c), nullptr, incomplete)}});
  }
  void write_failure(const ApiError& error) override {
    Json err = {{"code", error.code.empty() ? "server_error" : error.code}, {"message", error.message}};
    event("response.failed", {{"response", response_object(context(), "failed", output_, nullptr, err)}});
  }

  int sequence_ = 0;
  int output_index_ = 0;
  Json output_ = Json::array();
  std::string id_;
  std::string text_;
  ToolCall call_;
  bool custom_ = false;
};

class OpenAIResponsesAdapter final : public ApiAdapter {
 public:
  ApiFlavor flavor() const override { return ApiFlavor::kOpenAI; }
  std::string_view name() const override { return "responses"; }

  Result<ParsedRequest> parse(const Json& body, const ParseContext&) const override {
    if (!body.is_object()) return Status::error("the request body must be a JSON object, not " + json_type_phrase(body));
    FieldReader f(body, "");
    ParsedRequest r;
    r.kind = RequestKind::kChat;
    Conversation& c = r.conversation;
    HELIUM_ASSIGN_OR_RETURN(auto model, f.string("model"));
    (void)model;
    HELIUM_ASSIGN_OR_RETURN(auto previous, f.string("previous_response_id"));
    if (previous)
      return Status::error("`previous_response_id` is not supported: this server keeps no responses; send the whole "
                           "conversation in `input`");
    HELIUM_ASSIGN_OR_RETURN(auto instructions, f.string("instructions"));
    if (instructions && !instructions->empty()) c.messages.push_back({"system", *instructions, "", {}, "", ""});
    if (const Json* input = f.find("input")) {
      if (input->is_string()) {
        c.messages.push_back({"user", input->get<std::string>(), "", {}, "", ""});
      } else if (input->is_array()) {
        HELIUM_RETURN_IF_ERROR(read_input_items(*input, c));
      } else {
        return f.wrong_type("input", "a string or an array of input items");
      }
    }
    // Probes (Codex sends an empty input with max_output_tokens 1) are answered like any request.
    if (c.messages.empty() || c.messages.back().role == "system") c.messages.push_back({"user", "", "", {}, "", ""});
    HELIUM_RETURN_IF_ERROR(read_tools(f, c));
    HELIUM_RETURN_IF_ERROR(read_tool_choice(f, c));
    HELIUM_ASSIGN_OR_RETURN(auto stream, f.boolean("stream"));
    r.stream = stream.value_or(false);
    HELIUM_ASSIGN_OR_RETURN(auto max_output_tokens, f.integer("max_output_tokens", 1, std::numeric_limits<int32_t>::max()));
    r.settings.max_tokens = max_output_tokens;
    HELIUM_RETURN_IF_ERROR(read_sampling_fields(f, r.settings));
    HELIUM_ASSIGN_OR_RETURN(const Json* text, f.object("text"));
    if (text) {
      FieldReader t(*text, "text");
      if (const Json* format = t.find("format")) {
        HELIUM_ASSIGN_OR_RETURN(c.output_instruction, output_instruction_for_format(*format, "text.format", /*responses_shape=*/true));
      }
    }
    HELIUM_ASSIGN_OR_RETURN(const Json* reasoning, f.object("reasoning"));
    if (reasoning) {
      HELIUM_ASSIGN_OR_RETURN(auto effort, FieldReader(*reasoning, "reasoning").string("effort"));
      if (effort && (*effort == "none" || *effort == "minimal")) c.enable_thinking = false;
    }
    // Fields the response object repeats back.
    Json& echo = r.response_echo;
    echo["instructions"] = instructions ? Json(*instructions) : Json();
    echo["max_output_tokens"] = max_output_tokens ? Json(*max_output_tokens) : Json();
    echo["tools"] = f.find("tools") ? *f.find("tools") : Json::array();
    echo["tool_choice"] = f.find("tool_choice") ? *f.find("tool_choice") : Json("auto");
    echo["parallel_tool_calls"] = f.find("parallel_tool_calls") ? *f.find("parallel_tool_calls") : Json(true);
    echo["temperature"] = f.find("temperature") ? *f.find("temperature") : Json();
    echo["top_p"] = f.find("top_p") ? *f.find("top_p") : Json();
    echo["reasoning"] = reasoning ? *reasoning : Json{{"effort", nullptr}, {"summary", nullptr}};
    echo["text"] = text ? *text : Json{{"format", {{"type", "text"}}}};
    echo["metadata"] = f.find("metadata") ? *f.find("metadata") : Json::object();
    return r;
  }

  std::unique_ptr<StreamWriter> make_stream_writer(const ResponseContext& context) const override {
    return std::make_unique<ResponsesStreamWriter>(context);
  }

  Json make_response(const ResponseContext& context, const Completion& c) const override {
    auto [status, incomplete] = completed_status(c);
    return response_object(context, status, output_items(context, c), usage_json(c), nullptr, incomplete);
  }
};

}  // namespace

std::unique_ptr<ApiAdapter> make_openai_responses_adapter() { return std::make_unique<OpenAIResponsesAdapter>(); }

}  // namespace helium::server
