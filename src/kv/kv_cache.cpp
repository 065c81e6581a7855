#include "kv/kv_cache.h"

#include <algorithm>
#include <string>

namespace helium {

Result<std::unique_ptr<KvCache>> KvCache::create(Backend& backend, const KvSpec& spec, int64_t slots, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    return Status::error("KV cache dtype must be F32 or BF16, not " + std::string(dtype_name(dtype)));
  if (slots <= 0 || slots > INT32_MAX) return Status::error("KV cache needs a positive slot count");
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->capacity_ = slots;
  const size_t bytes = static_cast<size_t>(slots * spec.kv_dim) * dtype_bytes(dtype);
  for (int l = 0; l < spec.layers; ++l) {
    LayerKv kv;
    for (Tensor* t : {&kv.k, &kv.v}) {
      auto buffer = backend.allocate(bytes);
      if (!buffer.is_ok())
        return buffer.status().with_context("KV cache (" + std::to_string(slots) + " slots x " +
                                            std::to_string(spec.layers) + " layers)");
      *t = Tensor(buffer.value()->data(), dtype, {slots, spec.kv_dim});
      cache->buffers_.push_back(std::move(buffer).value());
    }
    cache->layers_.push_back(kv);
  }
  // Hand out low slots first: a short conversation stays in a compact region.
  cache->free_.resize(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) cache->free_[i] = static_cast<int32_t>(slots - 1 - i);
  return cache;
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const auto& b : buffers_) total += b->bytes();
  return total;
}

int32_t KvCache::new_sequence() {
  int32_t id = next_seq_++;
  seqs_[id];
  return id;
}

void KvCache::free_sequence(int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  free_.insert(free_.end(), it->second.rbegin(), it->second.rend());
  seqs_.erase(it);
}

int64_t KvCache::length(int32_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void KvCache::trim(int32_t seq, int64_t length) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  auto& slots = it->second;
  while (static_cast<int64_t>(slots.size()) > std::max<int64_t>(length, 0)) {
    free_.push_back(slots.back());
    slots.pop_back();
  }
}

int32_t KvCache::take_slot() {
  int32_t s = free_.back();
  free_.pop_back();
  return s;
}

Status KvCache::plan(Batch& batch) {
  release_pending();
  const int32_t rows = batch.rows();
  batch.kv_write_slots.assign(rows, -1);
  batch.attend_offsets.assign(1, 0);
  batch.attend_slots.clear();
  if (static_cast<int64_t>(rows) > free_slots())
    return Status::error("KV cache is full: " + std::to_string(rows) + " new positions, " +
                         std::to_string(free_slots()) + " free of " + std::to_string(capacity_));
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t seq = batch.seq_ids[r], pos = batch.positions[r], parent = batch.parent_rows[r];
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return Status::error("row " + std::to_string(r) + ": unknown sequence " + std::to_string(seq));
    std::vector<int32_t>& seq_slots = it->second;
    if (parent < 0) {
      if (pos != static_cast<int32_t>(seq_slots.size()))
        return Status::error("row " + std::to_string(r) + ": position " + std::to_string(pos) + " does not continue sequence " +
                             std::to_string(seq) + " of length " + std::to_string(seq_slots.size()));
      int32_t slot = take_slot();
      seq_slots.push_back(slot);
      batch.kv_write_slots[r] = slot;
      batch.attend_slots.insert(batch.attend_slots.end(), seq_slots.begin(), seq_slots.end());
    } else {
      if (parent >= r || batch.seq_ids[parent] != seq || batch.positions[parent] + 1 != pos)
        return Status::error("row " + std::to_string(r) + ": parent row " + std::to_string(parent) +
                             " is not an earlier row of the same sequence one position back");
      int32_t slot = take_slot();
      pending_.push_back(slot);
      batch.kv_write_slots[r] = slot;
      // Ancestors up to the first linear row, then that row's committed prefix.
      std::vector<int32_t> chain{slot};
      int32_t a = parent;
      while (batch.parent_rows[a] >= 0) {
        chain.push_back(batch.kv_write_slots[a]);
        a = batch.parent_rows[a];
      }
      const int32_t root_pos = batch.positions[a];
      batch.attend_slots.insert(batch.attend_slots.end(), seq_slots.begin(), seq_slots.begin() + root_pos + 1);
      batch.attend_slots.insert(batch.attend_slots.end(), chain.rbegin(), chain.rend());
    }
    batch.attend_offsets.push_back(static_cast<int32_t>(batch.attend_slots.size()));
  }
  return Status::ok();
}

Status KvCache::accept_tree_path(const Batch& batch, std::span<const int32_t> path) {
  if (path.empty()) {
    release_pending();
    return Status::ok();
  }
  const int32_t seq = batch.seq_ids[path[0]];
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return Status::error("accept_tree_path: unknown sequence");
  std::vector<int32_t> accepted;
  for (size_t i = 0; i < path.size(); ++i) {
    int32_t r = path[i];
    if (r < 0 || r >= batch.rows() || batch.parent_rows[r] < 0 || batch.seq_ids[r] != seq ||
        (i > 0 && batch.parent_rows[r] != path[i - 1]) ||
        batch.positions[r] != static_cast<int32_t>(it->second.size() + i))
      return Status::error("accept_tree_path: row " + std::to_string(r) + " does not extend the path");
    accepted.push_back(batch.kv_write_slots[r]);
  }
  it->second.insert(it->second.end(), accepted.begin(), accepted.end());
  for (int32_t s : accepted) pending_.erase(std::find(pending_.begin(), pending_.end(), s));
  release_pending();
  return Status::ok();
}

void KvCache::release_pending() {
  free_.insert(free_.end(), pending_.begin(), pending_.end());
  pending_.clear();
}

}  // namespace helium
