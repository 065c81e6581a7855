// tokenizer/incremental_detokenizer.cpp — streaming ids to text (see IncrementalDetokenizer in
// tokenizer.h).
//
// The method (the one Hugging Face's text-generation-inference uses): decode a short window of recent
// ids twice, without and with the ids not yet reported, and report the difference once it no longer
// ends in U+FFFD. Decoding a window rather than single ids keeps context-dependent decoders right (a
// space that a Metaspace decoder drops only on the first token, a character split over byte tokens), and
// a text that ends in U+FFFD is usually a character still missing its last bytes.
//
// ids_[prefix_offset_, read_offset_) is the window already reported; ids from read_offset_ on are not.
#include <utility>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace helium {

namespace {

namespace unicode = tokenizer_json::unicode;

bool ends_with_replacement(const std::string& text) {
  return text.size() >= unicode::kReplacementUtf8.size() &&
         text.compare(text.size() - unicode::kReplacementUtf8.size(), unicode::kReplacementUtf8.size(),
                      unicode::kReplacementUtf8) == 0;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  const std::span<const int32_t> all(ids_);
  const std::string reported =
      tokenizer_->decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string current = tokenizer_->decode(all.subspan(prefix_offset_), skip_special_);
  // Only text that extends what was reported can be split off at a byte offset; every decoder helium
  // supports decodes a window that way. Anything else waits for flush().
  if (current.size() <= reported.size() || ends_with_replacement(current) ||
      current.compare(0, reported.size(), reported) != 0) {
    return std::string();
  }
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return current.substr(reported.size());
}

std::string IncrementalDetokenizer::flush() {
  const std::span<const int32_t> all(ids_);
  const std::string reported =
      tokenizer_->decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string current = tokenizer_->decode(all.subspan(prefix_offset_), skip_special_);
  ids_.clear();
  prefix_offset_ = read_offset_ = 0;
  // Normally `current` extends `reported`; should a decoder ever rewrite the end of the window, what
  // follows the common part (cut at a character boundary) is the best remaining answer.
  size_t common = 0;
  while (common < reported.size() && common < current.size() && reported[common] == current[common]) ++common;
  while (common > 0 && common < current.size() &&
         (static_cast<unsigned char>(current[common]) & 0xC0) == 0x80) {
    --common;
  }
  return current.substr(common);
}

}  // namespace helium
