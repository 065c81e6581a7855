// tokenizer/bpe.h — the byte-pair-encoding model of tokenizer.json ("type": "BPE").
// Owns: the vocabulary, the merge ranks and the merge loop, unknown-token and byte-fallback handling, and
// a per-word cache. Must not: split text into words or know added tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace helium::tokenizer_json {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object.
  static Result<std::unique_ptr<BpeModel>> from_json(const json_fields::Json& model);

  // Appends the ids of one pre-token `word` (valid UTF-8) to `out`, as the reference's BPE::tokenize:
  // characters looked up in the vocabulary (or replaced by <0xNN> byte tokens, or by the unknown
  // token), then merged pair by pair, lowest merge rank first and leftmost among equal ranks.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // null for an id the vocabulary does not have
  int32_t id_end() const { return static_cast<int32_t>(tokens_.size()); }  // 1 + the largest id

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Open-addressing map from an id pair to its merge (rank, id of the merged token); the merge loop does
  // a lookup per candidate pair, so this is the hot table.
  class MergeTable {
   public:
    struct Merge {
      int32_t rank;
      int32_t merged_id;
    };
    void reserve(size_t n);
    void insert_or_assign(int32_t left, int32_t right, Merge merge);
    const Merge* find(int32_t left, int32_t right) const;

   private:
    static uint64_t key(int32_t left, int32_t right) {
      return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    static constexpr uint64_t kEmpty = ~uint64_t{0};  // never a key: ids are below 2^31
    std::vector<uint64_t> keys_;
    std::vector<Merge> values_;
    size_t size_ = 0;
  };

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;  // by id; empty where no token has the id
  std::vector<bool> has_token_;
  std::unordered_map<std::string_view, int32_t> vocab_;  // keys view the strings of tokens_
  MergeTable merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::vector<int32_t> byte_ids_;  // <0xNN> token ids when byte_fallback; -1 where missing

  // Words seen before, with their ids. Bounded: cleared when full. The mutex makes encode() safe to call
  // from several threads on one shared tokenizer.
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace helium::tokenizer_json
