// server/conversation.h — the one internal form every API request becomes: a conversation in OpenAI
// chat shape (messages, tools, tool choice, template switches) plus generation settings.
// Owns: these plain types. Must not: parse any API's JSON (the adapters do) or render prompts
// (prompt_renderer.h does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace helium::server {

struct ToolCallRecord {
  std::string id;
  std::string name;       // the name the model sees (tool_name_for_model of a namespaced tool)
  std::string arguments;  // JSON text as the client sent it
};

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
  std::string reasoning;                   // assistant: reasoning_content / thinking blocks
  std::vector<ToolCallRecord> tool_calls;  // assistant
  std::string tool_call_id;                // tool
  std::string name;                        // tool: the called function's name, when known
};

enum class ToolKind {
  kFunction,  // arguments are a JSON object
  kCustom,    // Responses `custom` tool: free text, offered to the model as a function of one string `input`
};

struct ToolDefinition {
  std::string name;  // what the model sees and calls
  std::string description;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // JSON schema of the arguments object
  ToolKind kind = ToolKind::kFunction;
  // Responses namespaces are flattened: the model sees "<namespace>__<name>", the client gets back
  // `name` and `namespace` separately.
  std::string client_name;
  std::string client_namespace;
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string name;  // kNamed
};

struct Conversation {
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice;
  // Maps to the template's `enable_thinking` when the template reads it; unset leaves its default.
  std::optional<bool> enable_thinking;
  // More template variables from the request (OpenAI `chat_template_kwargs`).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // response_format / text.format: an instruction added to the system prompt (re-prompting).
  std::string output_instruction;
};

struct GenerationSettings {
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<int64_t> max_tokens;
  std::vector<std::string> stop;
};

// Looks a tool up by the name the model uses; nullptr when the request offered none by that name.
inline const ToolDefinition* find_tool(const std::vector<ToolDefinition>& tools, const std::string& name) {
  for (const auto& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace helium::server
