// server/prompt_renderer.cpp — see prompt_renderer.h.
#include "server/prompt_renderer.h"

#include <chrono>
#include <filesystem>
#include <map>

#include "chat/reasoning.h"
#include "server/json_fields.h"

namespace helium::server {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Tool-call arguments go to templates as objects, the way transformers passes them: most templates
// print them with `| tojson`, which would quote a string a second time. Text that is not a JSON object
// stays text.
OrderedJson arguments_for_template(const std::string& arguments) {
  if (arguments.empty()) return OrderedJson::object();
  try {
    OrderedJson parsed = OrderedJson::parse(arguments);
    if (parsed.is_object()) return parsed;
  } catch (const nlohmann::json::exception&) {
  }
  return arguments;
}

std::string tool_choice_instruction(const ToolChoice& choice) {
  switch (choice.mode) {
    case ToolChoiceMode::kRequired: return "You must answer by calling one or more of the provided tools.";
    case ToolChoiceMode::kNamed: return "You must answer by calling the tool `" + choice.name + "`.";
    default: return {};
  }
}

std::string today_for_templates() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &local);
  return buf;
}

}  // namespace

ServedModel describe_engine_model(const Engine& engine, const std::string& alias) {
  ServedModel model;
  const Checkpoint& checkpoint = engine.checkpoint();
  if (!alias.empty()) {
    model.id = alias;
  } else {
    std::filesystem::path dir(checkpoint.dir);
    while (!dir.empty() && dir.filename().empty()) dir = dir.parent_path();  // "models/x/" -> "x"
    model.id = dir.filename().string();
    if (model.id.empty()) model.id = "helium";
  }
  model.tokenizer = engine.tokenizer_ptr();
  model.chat_template = engine.tokenizer().chat_template();
  model.model_type = checkpoint.model_type;
  model.context = engine.context();
  model.generation = checkpoint.generation;
  model.created_unix = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  return model;
}

PromptRenderer::PromptRenderer(const ServedModel& model) : tokenizer_(model.tokenizer) {
  format_ = detect_output_format(model.model_type, model.chat_template);
  if (tokenizer_) {
    if (auto bos = tokenizer_->bos_token_id()) bos_token_ = tokenizer_->id_to_token(*bos).value_or("");
    if (auto eos = tokenizer_->eos_token_id()) eos_token_ = tokenizer_->id_to_token(*eos).value_or("");
  }
  if (model.chat_template.empty()) {
    template_error_ = "the model " + model.id +
                      " has no chat template (tokenizer_config.json `chat_template` or chat_template.jinja), so "
                      "chat requests cannot be formatted; /v1/completions takes raw prompts";
    return;
  }
  Result<ChatTemplate> parsed = ChatTemplate::parse(model.chat_template);
  if (!parsed.is_ok()) {
    template_error_ = "the chat template of " + model.id + " does not parse: " + parsed.error_message();
    return;
  }
  chat_template_ = std::make_unique<ChatTemplate>(std::move(parsed).value());
  template_reads_enable_thinking_ = model.chat_template.find("enable_thinking") != std::string::npos;
}

Result<ChatTemplateInputs> PromptRenderer::template_inputs(const Conversation& c) const {
  ChatTemplateInputs inputs;
  inputs.bos_token = bos_token_;
  inputs.eos_token = eos_token_;
  inputs.add_generation_prompt = true;

  const bool offer_tools = c.tool_choice.mode != ToolChoiceMode::kNone && !c.tools.empty();
  OrderedJson tools = OrderedJson::array();
  if (offer_tools) {
    for (const ToolDefinition& t : c.tools) {
      if (c.tool_choice.mode == ToolChoiceMode::kNamed && t.name != c.tool_choice.name) continue;
      OrderedJson function = {{"name", t.name}};
      if (!t.description.empty()) function["description"] = t.description;
      function["parameters"] = t.parameters;
      tools.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    if (c.tool_choice.mode == ToolChoiceMode::kNamed && tools.empty())
      return Status::error("`tool_choice` names the tool `" + c.tool_choice.name + "`, which is not in `tools`");
  }
  inputs.tools = tools.empty() ? OrderedJson() : tools;

  // Leading system messages become one (several templates accept a system message only first), and the
  // server's own instructions go at its end, where they stay the same from turn to turn (a stable prefix
  // keeps the prompt cache useful).
  std::string system;
  size_t first = 0;
  while (first < c.messages.size() && c.messages[first].role == "system") {
    if (!system.empty()) system += "\n\n";
    system += c.messages[first].content;
    ++first;
  }
  for (const std::string& extra : {offer_tools ? tool_choice_instruction(c.tool_choice) : std::string(),
                                   c.output_instruction}) {
    if (extra.empty()) continue;
    if (!system.empty()) system += "\n\n";
    system += extra;
  }
  if (first > 0 || !system.empty()) inputs.messages.push_back({{"role", "system"}, {"content", system}});

  std::map<std::string, std::string> tool_names_by_call_id;
  for (size_t i = first; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    OrderedJson message = {{"role", m.role}, {"content", m.content}};
    if (m.role == "assistant") {
      if (!m.reasoning.empty()) message["reasoning_content"] = m.reasoning;
      if (!m.tool_calls.empty()) {
        OrderedJson calls = OrderedJson::array();
        for (const ToolCallRecord& call : m.tool_calls) {
          tool_names_by_call_id[call.id] = call.name;
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", arguments_for_template(call.arguments)}}}});
        }
        message["tool_calls"] = std::move(calls);
      }
    } else if (m.role == "tool") {
      message["tool_call_id"] = m.tool_call_id;
      std::string name = m.name;
      if (name.empty()) {
        auto it = tool_names_by_call_id.find(m.tool_call_id);
        if (it != tool_names_by_call_id.end()) name = it->second;
      }
      if (!name.empty()) message["name"] = name;
    }
    inputs.messages.push_back(std::move(message));
  }

  if (template_reads_enable_thinking_ && c.enable_thinking) inputs.extra["enable_thinking"] = *c.enable_thinking;
  for (auto it = c.template_kwargs.begin(); it != c.template_kwargs.end(); ++it)
    inputs.extra[it.key()] = it.value();
  return inputs;
}

Result<RenderedPrompt> PromptRenderer::render(const Conversation& conversation, std::string_view strftime_now) const {
  if (!chat_template_) return Status::error(template_error_);
  if (conversation.messages.empty()) return Status::error("the conversation has no messages");
  HELIUM_ASSIGN_OR_RETURN(ChatTemplateInputs inputs, template_inputs(conversation));

  // A trailing assistant message is continued, not closed: render what comes before it and append its
  // text after the generation prompt.
  std::string prefill;
  if (conversation.messages.back().role == "assistant" && inputs.messages.size() > 1 &&
      conversation.messages.back().tool_calls.empty()) {
    prefill = conversation.messages.back().content;
    inputs.messages.erase(inputs.messages.end() - 1);
  }
  inputs.extra["strftime_now"] = strftime_now.empty() ? today_for_templates() : std::string(strftime_now);
  Result<std::string> text = chat_template_->render(inputs);
  if (!text.is_ok()) return Status::error("the chat template failed to render the conversation: " + text.error_message());

  RenderedPrompt prompt;
  prompt.text = std::move(text).value() + prefill;
  prompt.tokens = tokenizer_->encode(prompt.text, /*add_special_tokens=*/false);
  prompt.parser.tool_call_format = format_.tool_calls;
  prompt.parser.reasoning_format = format_.reasoning;
  prompt.parser.starts_in_reasoning =
      format_.reasoning == ReasoningFormat::kThinkTags && prefill.empty() && prompt_opens_reasoning(prompt.text);
  prompt.parser.tools = nlohmann::json::array();
  if (!inputs.tools.is_null()) prompt.parser.tools = nlohmann::json::parse(inputs.tools.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return prompt;
}

}  // namespace helium::server
