// chat/output_parser_scan.h — small text tests shared by the streaming output parsers.
// Owns: the hold-back rule (the shortest suffix that could still start a tag) and whitespace tests.
// Must not: keep state; the parsers own their buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace helium::output_scan {

// The whitespace JSON and the chat formats put between tags.
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline size_t leading_space_length(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && is_space(text[n])) ++n;
  return n;
}

inline size_t trailing_space_length(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && is_space(text[text.size() - 1 - n])) ++n;
  return n;
}

// The length of the longest suffix of `text` that is a proper prefix of one of `tags`: those bytes
// must be held back, since the next chunk may complete the tag. Everything before them is certain.
inline size_t partial_tag_suffix(std::string_view text, std::initializer_list<std::string_view> tags) {
  size_t longest = 0;
  for (std::string_view tag : tags) {
    size_t max_len = std::min(text.size(), tag.size() - 1);
    for (size_t len = max_len; len > longest; --len) {
      if (text.substr(text.size() - len) == tag.substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

// What `text` says about `tag` at its start: it begins with the whole tag, it is a proper prefix of the
// tag (more bytes are needed), or neither.
enum class TagMatch { kFull, kPartial, kNo };
inline TagMatch match_tag_at_start(std::string_view text, std::string_view tag) {
  if (text.size() >= tag.size()) return text.substr(0, tag.size()) == tag ? TagMatch::kFull : TagMatch::kNo;
  return tag.substr(0, text.size()) == text ? TagMatch::kPartial : TagMatch::kNo;
}

}  // namespace helium::output_scan
