// kv/kv_cache.h — slot bookkeeping for the attention KV cache of one model.
// Owns: the per-layer K/V buffers (allocated once through the backend), which slot holds which
// (sequence, position), free slots, and turning a Batch's rows into write slots and attention lists
// (linear rows and speculation-tree rows). Must not: compute attention or touch tensor contents.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "models/model.h"

namespace helium {

class KvCache {
 public:
  // Allocates `slots` positions of K and V for every layer of `spec`, stored as `dtype` (F32 or BF16).
  static Result<std::unique_ptr<KvCache>> create(Backend& backend, const KvSpec& spec, int64_t slots, DType dtype);

  int32_t new_sequence();
  void free_sequence(int32_t seq);
  bool has_sequence(int32_t seq) const { return seqs_.count(seq) != 0; }
  int64_t length(int32_t seq) const;           // committed positions
  void trim(int32_t seq, int64_t length);      // keeps positions [0, length)
  int64_t free_slots() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity() const { return capacity_; }
  size_t bytes() const;

  // Fills batch.kv_write_slots / attend_offsets / attend_slots. Linear rows (parent_row -1) must come in
  // position order and continue their sequence; they are committed to it at once. Tree rows (parent_row
  // >= 0, an earlier row of the same sequence, position = parent's + 1) get scratch slots that stay
  // pending until accept_tree_path() or release_pending().
  Status plan(Batch& batch);
  // Commits the tree rows `path` (each the child of the previous; the first a child of a linear row) of
  // the last planned batch to their sequence, and frees every other pending scratch slot.
  Status accept_tree_path(const Batch& batch, std::span<const int32_t> path);
  void release_pending();

  std::span<const LayerKv> layers() const { return layers_; }

 private:
  KvCache() = default;
  int32_t take_slot();

  int64_t capacity_ = 0;
  std::vector<std::shared_ptr<DeviceBuffer>> buffers_;
  std::vector<LayerKv> layers_;
  std::vector<int32_t> free_;
  std::unordered_map<int32_t, std::vector<int32_t>> seqs_;  // sequence -> slot of each position
  std::vector<int32_t> pending_;                            // scratch slots of the last planned tree rows
  int32_t next_seq_ = 0;
};

}  // namespace helium
