// chat/reasoning.cpp — the `<think>` splitter and the content parser that puts it in front of another.
#include "chat/reasoning.h"

#include <utility>

#include "chat/output_parser_scan.h"

namespace helium {
namespace {

using output_scan::TagMatch;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

class ThinkTagParser final : public ContentParser {
 public:
  ThinkTagParser(bool starts_in_reasoning, std::unique_ptr<ContentParser> content)
      : splitter_(starts_in_reasoning), content_(std::move(content)) {}

  void feed(std::string_view chunk, ContentSink& sink) override { pass_on(splitter_.feed(chunk), sink); }

  void finish(ContentSink& sink) override {
    pass_on(splitter_.finish(), sink);
    content_->finish(sink);
  }

 private:
  void pass_on(const ReasoningSplit& split, ContentSink& sink) {
    if (!split.reasoning.empty()) sink.on_reasoning(split.reasoning);
    if (!split.content.empty()) content_->feed(split.content, sink);
  }

  ThinkTagSplitter splitter_;
  std::unique_ptr<ContentParser> content_;
};

}  // namespace

ThinkTagSplitter::ThinkTagSplitter(bool starts_in_reasoning) : starts_in_reasoning_(starts_in_reasoning) {}

ReasoningSplit ThinkTagSplitter::feed(std::string_view chunk) {
  pending_.append(chunk);
  return advance(/*at_end=*/false);
}

ReasoningSplit ThinkTagSplitter::finish() { return advance(/*at_end=*/true); }

ReasoningSplit ThinkTagSplitter::advance(bool at_end) {
  ReasoningSplit out;
  if (state_ == State::kOpening) {
    const size_t space = output_scan::leading_space_length(pending_);
    const std::string_view rest = std::string_view(pending_).substr(space);
    const TagMatch open = output_scan::match_tag_at_start(rest, kThinkOpen);
    if (!at_end && (rest.empty() || open == TagMatch::kPartial)) return out;
    if (open == TagMatch::kFull) {
      pending_.erase(0, space + kThinkOpen.size());
      state_ = State::kReasoning;
    } else if (starts_in_reasoning_) {
      state_ = State::kReasoning;
    } else {
      state_ = State::kContent;
      content_started_ = true;  // no reasoning: the content is kept exactly
    }
  }
  if (state_ == State::kReasoning) {
    if (!reasoning_started_) {
      pending_.erase(0, output_scan::leading_space_length(pending_));
      if (pending_.empty()) return out;
      reasoning_started_ = true;
    }
    const std::string_view pending = pending_;
    const size_t close = pending.find(kThinkClose);
    if (close == std::string_view::npos) {
      // Hold back what could start `</think>`, and the whitespace before it, which is dropped if the
      // reasoning ends there.
      size_t keep = at_end ? 0 : output_scan::partial_tag_suffix(pending, {kThinkClose});
      std::string_view certain = pending.substr(0, pending.size() - keep);
      certain.remove_suffix(output_scan::trailing_space_length(certain));
      out.reasoning = std::string(certain);
      pending_.erase(0, at_end ? pending_.size() : certain.size());
      return out;
    }
    std::string_view reasoning = pending.substr(0, close);
    reasoning.remove_suffix(output_scan::trailing_space_length(reasoning));
    out.reasoning = std::string(reasoning);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::kContent;
  }
  if (!content_started_) {
    pending_.erase(0, output_scan::leading_space_length(pending_));
    if (pending_.empty()) return out;
    content_started_ = true;
  }
  out.content += pending_;
  pending_.clear();
  return out;
}

std::unique_ptr<ContentParser> make_think_tag_parser(bool starts_in_reasoning, std::unique_ptr<ContentParser> content) {
  return std::make_unique<ThinkTagParser>(starts_in_reasoning, std::move(content));
}

bool prompt_opens_reasoning(std::string_view rendered_prompt) {
  rendered_prompt.remove_suffix(output_scan::trailing_space_length(rendered_prompt));
  return rendered_prompt.ends_with(kThinkOpen);
}

}  // namespace helium
