// chat/chat_template.h — a model's chat template (the Jinja text of tokenizer_config.json's
// `chat_template` or chat_template.jinja), parsed once and rendered per request into the prompt text.
// Owns: the public chat-template API and how a conversation becomes template variables, the way
// transformers' apply_chat_template passes them. Must not: tokenize, or parse model output (the tool-call
// and reasoning parsers live beside it in chat/).
//
// Rendering is byte-identical to @huggingface/jinja on the real templates the tests carry (Qwen3,
// Qwen3-Coder, Gemma 3, Llama 3.x, GPT-OSS), except where that differs from Python Jinja (what
// transformers renders with): jinja_interpreter.h lists those points, where helium follows Python. A parsed template is immutable: render() may run on many threads at once.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace helium {

namespace jinja {
struct Program;
}

struct ChatTemplateInputs {
  // OpenAI-style messages: role, content (a string or a list of parts), tool_calls, tool_call_id, name,
  // reasoning_content, ... passed to the template as they are. ordered_json, because templates print
  // dicts with tojson and the key order must be the client's.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // null, or [{"type": "function", "function": {name, description, parameters}}]. Passed as `tools`
  // either way (null becomes none, as transformers passes tools=None).
  nlohmann::ordered_json tools;
  bool add_generation_prompt = true;
  // More template variables (enable_thinking, reasoning_effort, builtin_tools, ...); they replace the
  // variables above of the same name. One key is not a variable: "strftime_now", a local time
  // "YYYY-MM-DD", "YYYY-MM-DDTHH:MM" or "YYYY-MM-DDTHH:MM:SS" that the template's strftime_now() then
  // formats instead of the clock (for reproducible prompts and tests).
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  std::string bos_token;
  std::string eos_token;
};

class ChatTemplate {
 public:
  // Parses the template; a syntax error names line:column and what was expected, an unknown filter or
  // test names it.
  static Result<ChatTemplate> parse(std::string_view source);

  // Renders the prompt. A template's raise_exception(msg) becomes an error whose message contains msg;
  // other errors name the template line:column. Hostile templates are stopped by work, size and depth
  // limits (jinja::RenderLimits) rather than hanging or exhausting the stack.
  Result<std::string> render(const ChatTemplateInputs& inputs) const;

  const std::string& source() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const jinja::Program> program_;
};

}  // namespace helium
