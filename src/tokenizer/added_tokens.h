// tokenizer/added_tokens.h — the "added_tokens" of tokenizer.json: special tokens (<|im_start|>, <bos>)
// and other tokens added on top of the model's vocabulary, found in text before the model sees it.
// Owns: the added-token table, leftmost-longest matching on raw text (tokens with normalized == false) or
// on normalized text (normalized == true), and the lstrip / rstrip / single_word rules. Must not: know
// the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/regex.h"

namespace helium::tokenizer_json {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;  // only matches when not touching word characters on either side
  bool lstrip = false;       // swallows the whitespace before it
  bool rstrip = false;       // swallows the whitespace after it
  bool normalized = false;   // matched in normalized text rather than raw text
  bool special = false;      // dropped by decode(skip_special_tokens)
};

class AddedVocabulary {
 public:
  // A stretch of text: an added token (token >= 0, its index in tokens()) or plain text (token < 0).
  struct Split {
    size_t begin, end;
    int token;
  };

  AddedVocabulary() = default;
  // Reads tokenizer.json's "added_tokens" array. Tokens with normalized == true are matched in their
  // normalized form, which `normalizer` (may be null) gives.
  static Result<AddedVocabulary> from_json(const json_fields::Json& added_tokens,
                                           const Normalizer* normalizer);

  // Cuts `text` at the added tokens of one kind (raw: normalized == false, else normalized == true).
  std::vector<Split> split(std::string_view text, bool normalized_kind) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;

 private:
  // A byte trie over the contents of one kind, for leftmost-longest matching.
  class Matcher {
   public:
    void add(std::string_view pattern, int token);
    // The longest pattern starting at `pos`: its length and token, or token -1.
    std::pair<size_t, int> longest_at(std::string_view text, size_t pos) const;
    bool empty() const { return nodes_.size() <= 1; }

   private:
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
      int token = -1;
    };
    std::vector<Node> nodes_{1};
  };

  Status add_token(AddedToken token, const Normalizer* normalizer);

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Matcher raw_, normalized_;
  std::optional<Regex> word_char_;  // compiled only when some token is single_word
};

}  // namespace helium::tokenizer_json
