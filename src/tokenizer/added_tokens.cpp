// tokenizer/added_tokens.cpp — added and special tokens (see added_tokens.h).
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace helium::tokenizer_json {

namespace {

using json_fields::Json;

Result<AddedToken> parse_added_token(const Json& node, const std::string& where) {
  if (!node.is_object()) return Status::error(where + " must be an object");
  AddedToken token;
  const auto id = node.find("id");
  if (id == node.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
      id->get<int64_t>() > INT32_MAX) {
    return Status::error(where + ".id must be a non-negative 32-bit integer");
  }
  token.id = static_cast<int32_t>(id->get<int64_t>());
  HELIUM_ASSIGN_OR_RETURN(token.content, json_fields::required_string(node, "content", where));
  HELIUM_ASSIGN_OR_RETURN(token.single_word, json_fields::bool_or(node, "single_word", false, where));
  HELIUM_ASSIGN_OR_RETURN(token.lstrip, json_fields::bool_or(node, "lstrip", false, where));
  HELIUM_ASSIGN_OR_RETURN(token.rstrip, json_fields::bool_or(node, "rstrip", false, where));
  HELIUM_ASSIGN_OR_RETURN(token.special, json_fields::bool_or(node, "special", false, where));
  // Special tokens are matched in raw text unless the file says otherwise.
  HELIUM_ASSIGN_OR_RETURN(token.normalized, json_fields::bool_or(node, "normalized", !token.special, where));
  return token;
}

std::string_view char_before(std::string_view text, size_t end) {
  const size_t start = unicode::char_start_before(text, end);
  return text.substr(start, end - start);
}

std::string_view char_at(std::string_view text, size_t pos) {
  return text.substr(pos, unicode::sequence_length(static_cast<unsigned char>(text[pos])));
}

// Byte offset where the run of White_Space ending at `end` starts.
size_t whitespace_run_before(std::string_view text, size_t end) {
  while (end > 0 && unicode::is_white_space(unicode::decode_before(text, end))) {
    end = unicode::char_start_before(text, end);
  }
  return end;
}

// Byte offset where the run of White_Space starting at `begin` ends.
size_t whitespace_run_after(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    size_t pos = begin;
    if (!unicode::is_white_space(unicode::decode_next(text, pos))) break;
    begin = pos;
  }
  return begin;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view pattern, int token) {
  size_t node = 0;
  for (char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), byte,
                               [](const auto& child, unsigned char b) { return child.first < b; });
    if (it == children.end() || it->first != byte) {
      const auto child = static_cast<int32_t>(nodes_.size());
      children.insert(it, {byte, child});
      nodes_.emplace_back();  // invalidates `children`; not used after this
      node = static_cast<size_t>(child);
    } else {
      node = static_cast<size_t>(it->second);
    }
  }
  // Two tokens with the same matched form: the first one listed wins, as in the reference's trie.
  if (nodes_[node].token < 0) nodes_[node].token = token;
}

std::pair<size_t, int> AddedVocabulary::Matcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int> best{0, -1};
  size_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[node].children;
    const auto it = std::lower_bound(children.begin(), children.end(), byte,
                                     [](const auto& child, unsigned char b) { return child.first < b; });
    if (it == children.end() || it->first != byte) break;
    node = static_cast<size_t>(it->second);
    if (nodes_[node].token >= 0) best = {i + 1 - pos, nodes_[node].token};
  }
  return best;
}

Status AddedVocabulary::add_token(AddedToken token, const Normalizer* normalizer) {
  if (const AddedToken* same_id = find_id(token.id)) {
    if (same_id->content == token.content) return Status::ok();  // a repeated entry
    return Status::error("added_tokens: id " + std::to_string(token.id) + " is given to both '" +
                         same_id->content + "' and '" + token.content + "'");
  }
  if (const AddedToken* same_content = find_content(token.content)) {
    return Status::error("added_tokens: '" + token.content + "' has two ids, " +
                         std::to_string(same_content->id) + " and " + std::to_string(token.id));
  }
  if (token.single_word && !word_char_) {
    // The reference tests for its regex engine's \w: alphabetic, marks, decimal digits, connector
    // punctuation and the joiners.
    HELIUM_ASSIGN_OR_RETURN(Regex word,
                            Regex::from_oniguruma(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])"));
    word_char_ = std::move(word);
  }
  const int index = static_cast<int>(tokens_.size());
  std::string matched_form = token.content;
  if (token.normalized && normalizer != nullptr) matched_form = normalizer->normalize(matched_form);
  // Like the reference, a token whose matched form is empty is never found in text.
  if (!matched_form.empty()) (token.normalized ? normalized_ : raw_).add(matched_form, index);
  by_id_.emplace(token.id, tokens_.size());
  by_content_.emplace(token.content, tokens_.size());
  tokens_.push_back(std::move(token));
  return Status::ok();
}

Result<AddedVocabulary> AddedVocabulary::from_json(const Json& added_tokens, const Normalizer* normalizer) {
  AddedVocabulary vocabulary;
  if (added_tokens.is_null()) return vocabulary;
  if (!added_tokens.is_array()) return Status::error("added_tokens must be an array");
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    HELIUM_ASSIGN_OR_RETURN(AddedToken token,
                            parse_added_token(added_tokens[i], "added_tokens[" + std::to_string(i) + "]"));
    HELIUM_RETURN_IF_ERROR(vocabulary.add_token(std::move(token), normalizer));
  }
  return vocabulary;
}

const AddedToken* AddedVocabulary::find_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

std::vector<AddedVocabulary::Split> AddedVocabulary::split(std::string_view text,
                                                           bool normalized_kind) const {
  const Matcher& matcher = normalized_kind ? normalized_ : raw_;
  if (matcher.empty() || text.empty()) return {{0, text.size(), -1}};

  auto is_word_char = [this](std::string_view s) { return !word_char_->find_all(s).empty(); };
  std::vector<Split> splits;
  size_t done = 0;  // end of the last token split
  for (size_t pos = 0; pos < text.size();) {
    const auto [length, index] = matcher.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    size_t begin = pos;
    size_t end = pos + length;
    // The matches are leftmost-longest and do not overlap; a match rejected by single_word is skipped
    // without looking for shorter ones inside it, as the reference's find_iter does.
    pos = end;
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    if (token.single_word) {
      // Rejected when a word character touches it on either side.
      const bool touches_before = begin > 0 && is_word_char(char_before(text, begin));
      const bool touches_after = end < text.size() && is_word_char(char_at(text, end));
      if (touches_before || touches_after) continue;
    }
    if (token.lstrip) begin = std::max(whitespace_run_before(text, begin), done);
    if (token.rstrip) end = whitespace_run_after(text, end);
    if (done < begin) splits.push_back({done, begin, -1});
    splits.push_back({begin, end, index});
    done = end;
    pos = std::max(pos, end);
  }
  if (done < text.size()) splits.push_back({done, text.size(), -1});
  return splits;
}

}  // namespace helium::tokenizer_json
