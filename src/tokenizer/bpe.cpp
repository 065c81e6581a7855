// tokenizer/bpe.cpp — the BPE model (see bpe.h).
#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdint>
#include <queue>

#include "tokenizer/unicode.h"

namespace helium::tokenizer_json {

namespace {

using json_fields::Json;

Status model_error(const std::string& what) {
  return Status::error("model." + what);
}

// Reads one merges entry, "a b" (older files) or ["a", "b"], as views into the JSON text.
Result<std::pair<std::string_view, std::string_view>> parse_merge(const Json& entry, size_t index) {
  if (entry.is_string()) {
    const std::string_view line = entry.get_ref<const std::string&>();
    const size_t space = line.find(' ');
    if (space != std::string_view::npos && line.find(' ', space + 1) == std::string_view::npos) {
      return std::make_pair(line.substr(0, space), line.substr(space + 1));
    }
    return model_error("merges[" + std::to_string(index) + "] '" + std::string(line) +
                       "' is not two tokens separated by one space");
  }
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    return std::make_pair(std::string_view(entry[0].get_ref<const std::string&>()),
                          std::string_view(entry[1].get_ref<const std::string&>()));
  }
  return model_error("merges[" + std::to_string(index) + "] must be a string \"a b\" or a pair of strings");
}

}  // namespace

void BpeModel::MergeTable::reserve(size_t n) {
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, Merge{0, 0});
  size_ = 0;
}

void BpeModel::MergeTable::insert_or_assign(int32_t left, int32_t right, Merge merge) {
  if (2 * (size_ + 1) > keys_.size()) {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<Merge> old_values = std::move(values_);
    reserve(size_ + 1);
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) {
        insert_or_assign(static_cast<int32_t>(old_keys[i] >> 32),
                         static_cast<int32_t>(old_keys[i] & 0xFFFFFFFF), old_values[i]);
      }
    }
  }
  const uint64_t k = key(left, right);
  const size_t mask = keys_.size() - 1;
  for (size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
    if (keys_[i] == k) {
      values_[i] = merge;
      return;
    }
    if (keys_[i] == kEmpty) {
      keys_[i] = k;
      values_[i] = merge;
      ++size_;
      return;
    }
  }
}

const BpeModel::MergeTable::Merge* BpeModel::MergeTable::find(int32_t left, int32_t right) const {
  if (keys_.empty()) return nullptr;
  const uint64_t k = key(left, right);
  const size_t mask = keys_.size() - 1;
  for (size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
    if (keys_[i] == k) return &values_[i];
    if (keys_[i] == kEmpty) return nullptr;
  }
}

Result<std::unique_ptr<BpeModel>> BpeModel::from_json(const Json& model) {
  auto bpe = std::unique_ptr<BpeModel>(new BpeModel());

  const auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || vocab_it->is_null()) return model_error("vocab is missing");
  if (!vocab_it->is_object()) return model_error("vocab must be an object of token -> id");
  // Each token string is stored once, in tokens_ (by id); vocab_ maps views of those strings back to
  // ids. tokens_ is sized before any string goes in, so the views stay valid.
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab_it->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return model_error("vocab['" + token + "'] must be a non-negative 32-bit id");
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  bpe->tokens_.resize(static_cast<size_t>(max_id + 1));
  bpe->has_token_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : vocab_it->items()) {
    const auto index = static_cast<size_t>(id.get<int64_t>());
    if (bpe->has_token_[index]) {
      return model_error("vocab: id " + std::to_string(index) + " is given to both '" + bpe->tokens_[index] +
                         "' and '" + token + "'");
    }
    bpe->tokens_[index] = token;
    bpe->has_token_[index] = true;
  }
  bpe->vocab_.reserve(vocab_it->size());
  for (size_t id = 0; id < bpe->tokens_.size(); ++id) {
    if (bpe->has_token_[id]) bpe->vocab_.emplace(bpe->tokens_[id], static_cast<int32_t>(id));
  }

  HELIUM_ASSIGN_OR_RETURN(const std::string unk, json_fields::string_or(model, "unk_token", "", "model"));
  if (!unk.empty()) {
    const auto it = bpe->vocab_.find(unk);
    // The reference fails on the first unknown character in that case; failing at load says it sooner.
    if (it == bpe->vocab_.end()) return model_error("unk_token '" + unk + "' is not in the vocabulary");
    bpe->unk_id_ = it->second;
  }
  HELIUM_ASSIGN_OR_RETURN(bpe->fuse_unk_, json_fields::bool_or(model, "fuse_unk", false, "model"));
  HELIUM_ASSIGN_OR_RETURN(bpe->byte_fallback_, json_fields::bool_or(model, "byte_fallback", false, "model"));
  HELIUM_ASSIGN_OR_RETURN(bpe->ignore_merges_, json_fields::bool_or(model, "ignore_merges", false, "model"));
  HELIUM_ASSIGN_OR_RETURN(bpe->continuing_subword_prefix_,
                          json_fields::string_or(model, "continuing_subword_prefix", "", "model"));
  HELIUM_ASSIGN_OR_RETURN(bpe->end_of_word_suffix_,
                          json_fields::string_or(model, "end_of_word_suffix", "", "model"));
  if (const auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    if (!it->is_number()) return model_error("dropout must be a number or null");
    // Dropout makes encoding random; an inference engine needs the deterministic encoding.
    if (it->get<double>() > 0.0) return model_error("dropout > 0 is not supported");
  }
  if (bpe->byte_fallback_) {
    bpe->byte_ids_.assign(256, -1);
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
      if (const auto it = bpe->vocab_.find(name); it != bpe->vocab_.end()) bpe->byte_ids_[b] = it->second;
    }
  }

  const auto merges_it = model.find("merges");
  if (merges_it != model.end() && !merges_it->is_null()) {
    if (!merges_it->is_array()) return model_error("merges must be an array");
    const size_t prefix_size = bpe->continuing_subword_prefix_.size();
    bpe->merges_.reserve(merges_it->size());
    std::string merged;
    for (size_t i = 0; i < merges_it->size(); ++i) {
      HELIUM_ASSIGN_OR_RETURN(const auto pair, parse_merge((*merges_it)[i], i));
      const auto [left_token, right_token] = pair;
      auto where = [i] { return "merges[" + std::to_string(i) + "]: "; };
      const auto left = bpe->vocab_.find(left_token);
      const auto right = bpe->vocab_.find(right_token);
      if (left == bpe->vocab_.end()) {
        return model_error(where() + "'" + std::string(left_token) + "' is not in the vocabulary");
      }
      if (right == bpe->vocab_.end()) {
        return model_error(where() + "'" + std::string(right_token) + "' is not in the vocabulary");
      }
      // With a continuing-subword prefix ("##"), the right part carries the prefix and the merged
      // token does not repeat it.
      if (right_token.size() < prefix_size) {
        return model_error(where() + "'" + std::string(right_token) +
                           "' lacks the continuing_subword_prefix");
      }
      merged.assign(left_token);
      merged.append(right_token.substr(prefix_size));
      const auto merged_it = bpe->vocab_.find(std::string_view(merged));
      if (merged_it == bpe->vocab_.end()) {
        return model_error(where() + "'" + merged + "' is not in the vocabulary");
      }
      // A repeated pair keeps its last rank, as the reference's map construction does.
      bpe->merges_.insert_or_assign(left->second, right->second,
                                    {static_cast<int32_t>(i), merged_it->second});
    }
  }
  return bpe;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !has_token_[static_cast<size_t>(id)])
    return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  // ignore_merges (Llama 3, GPT-OSS): a word that is itself a token is not merged up from characters,
  // which could reach a different split.
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    size_t bytes;  // 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&symbols](int32_t id, size_t bytes) {
    const auto index = static_cast<int32_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, bytes});
  };

  // Initial symbols, one per character, following the reference's merge_word (including its order of
  // unknown-token and byte-fallback handling).
  const bool decorate = !continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty();
  std::string decorated;
  // An unknown character waits here so that a run of them can be fused into one unknown token.
  int32_t pending_unk = -1;
  size_t pending_unk_bytes = 0;
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    pos = std::min(word.size(), pos + unicode::sequence_length(static_cast<unsigned char>(word[pos])));
    std::string_view piece = word.substr(begin, pos - begin);
    const size_t bytes = piece.size();
    if (decorate) {
      decorated.clear();
      if (begin > 0) decorated += continuing_subword_prefix_;
      decorated += piece;
      if (pos == word.size()) decorated += end_of_word_suffix_;
      piece = decorated;
    }
    if (const auto it = vocab_.find(piece); it != vocab_.end()) {
      if (pending_unk >= 0) add(pending_unk, pending_unk_bytes);
      pending_unk = -1;
      add(it->second, bytes);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes_known = true;
      for (char c : piece) all_bytes_known = all_bytes_known && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all_bytes_known) {
        for (char c : piece) add(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && fuse_unk_) {
        pending_unk_bytes += bytes;
      } else {
        if (pending_unk >= 0) add(pending_unk, pending_unk_bytes);
        pending_unk = *unk_id_;
        pending_unk_bytes = bytes;
      }
    }
  }
  if (pending_unk >= 0) add(pending_unk, pending_unk_bytes);

  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged_id;
    // Lowest rank first, then leftmost.
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = merges_.find(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, static_cast<int32_t>(i), m->merged_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (left.bytes == 0 || left.next < 0) continue;
    const Symbol right = symbols[static_cast<size_t>(left.next)];
    // A stale candidate: one side has changed since it was queued.
    const auto* current = merges_.find(left.id, right.id);
    if (current == nullptr || current->merged_id != top.merged_id) continue;

    symbols[static_cast<size_t>(left.next)].bytes = 0;
    left.id = top.merged_id;
    left.bytes += right.bytes;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      if (const auto* m = merges_.find(symbols[static_cast<size_t>(left.prev)].id, left.id)) {
        queue.push({m->rank, left.prev, m->merged_id});
      }
    }
    if (left.next >= 0) {
      if (const auto* m = merges_.find(left.id, symbols[static_cast<size_t>(left.next)].id)) {
        queue.push({m->rank, top.pos, m->merged_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.bytes != 0) out.push_back(s.id);
  }
}

}  // namespace helium::tokenizer_json
