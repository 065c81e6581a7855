// chat/reasoning.h — splits `<think>…</think>` reasoning (Qwen3, QwQ, DeepSeek-R1 style) off the start
// of model output, in front of any content parser.
// Owns: where reasoning starts and ends in a stream, including output that starts inside reasoning
// because the template already opened `<think>` in the prompt. Must not: look for tool calls (the
// content parser behind it does) or build server events.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "chat/tool_call.h"

namespace helium {

// The reasoning and content bytes one feed made certain; reasoning always comes first.
struct ReasoningSplit {
  std::string reasoning;
  std::string content;
};

// Reasoning is only recognised at the start of the output: `<think>` after optional whitespace (or
// nothing, when `starts_in_reasoning`), up to the first `</think>`. Whitespace at both ends of the
// reasoning and right after `</think>` is dropped: the templates put it there and strip it again when
// they render the message back (Qwen3: `reasoning_content.strip('\n')`, `content.lstrip('\n')`).
// Output that does not start with `<think>` is all content; a `<think>` later on is content too. An
// unterminated `<think>` leaves everything after it as reasoning.
class ThinkTagSplitter {
 public:
  explicit ThinkTagSplitter(bool starts_in_reasoning);
  ReasoningSplit feed(std::string_view chunk);
  ReasoningSplit finish();

 private:
  enum class State { kOpening, kReasoning, kContent };
  ReasoningSplit advance(bool at_end);

  bool starts_in_reasoning_;
  State state_ = State::kOpening;
  std::string pending_;            // bytes not yet resolved
  bool reasoning_started_ = false;  // a non-space reasoning byte has been seen
  bool content_started_ = false;    // false right after </think>: leading whitespace is dropped
};

// A content parser that sends the reasoning to the sink and the rest to `content`.
std::unique_ptr<ContentParser> make_think_tag_parser(bool starts_in_reasoning, std::unique_ptr<ContentParser> content);

// Whether a rendered prompt leaves the model inside reasoning: it ends (before trailing whitespace)
// with an open `<think>`, as the Qwen3-Thinking, Qwen3.5 and DeepSeek-R1 templates do. The answer is
// OutputParserOptions::starts_in_reasoning.
bool prompt_opens_reasoning(std::string_view rendered_prompt);

}  // namespace helium
