// server/prompt_renderer.h — a conversation becomes prompt tokens: the served model's chat template
// renders it (template from tokenizer_config.json or chat_template.jinja), the tokenizer encodes the
// text with no special tokens beyond those the template writes, and the output parser is configured for
// what the template tells the model to write (tool-call and reasoning formats).
// Owns: the model description the server serves (ServedModel), the mapping of Conversation to template
// inputs, the system-prompt additions for tool_choice and response_format. Must not: run generation or
// know any API's JSON.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "chat/output_parser.h"
#include "engine/engine.h"
#include "loader/checkpoint.h"
#include "server/conversation.h"
#include "tokenizer/tokenizer.h"

namespace helium::server {

// What the server serves: one model, by the name clients see.
struct ServedModel {
  std::string id;  // --alias, or the model directory's name
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string chat_template;  // Jinja source; empty when the model has none
  std::string model_type;     // config.json model_type (picks the output format when there is no template)
  int64_t context = 0;        // KV positions
  GenerationConfig generation;  // sampling defaults from generation_config.json
  int64_t created_unix = 0;     // for /v1/models
};

// The served model of a loaded engine. `alias` empty: the checkpoint directory's last component.
ServedModel describe_engine_model(const Engine& engine, const std::string& alias);

struct RenderedPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  OutputParserOptions parser;  // formats, the offered tools, whether the output starts inside <think>
};

class PromptRenderer {
 public:
  // Parses the model's template once. A model without a template, or with one that does not parse,
  // still gets a renderer: it refuses conversations with template_error() and can count raw text.
  explicit PromptRenderer(const ServedModel& model);

  bool has_template() const { return chat_template_ != nullptr; }
  // Why conversations cannot be rendered (empty when they can).
  const std::string& template_error() const { return template_error_; }
  const OutputFormat& output_format() const { return format_; }

  // Renders with add_generation_prompt (the assistant's turn is next). A conversation that ends with an
  // assistant message is a prefill: the rest is rendered and that message's text appended, so the model
  // continues it. `strftime_now` fixes the date templates print (tests); empty uses the clock.
  Result<RenderedPrompt> render(const Conversation& conversation, std::string_view strftime_now = {}) const;

  // The template inputs render() would pass (for tests and count_tokens diagnostics).
  Result<ChatTemplateInputs> template_inputs(const Conversation& conversation) const;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::string template_error_;
  OutputFormat format_;
  bool template_reads_enable_thinking_ = false;
  std::string bos_token_, eos_token_;
};

}  // namespace helium::server
