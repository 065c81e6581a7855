// kv/kv_cache.h — page bookkeeping for the attention KV cache of one model.
// Owns: the per-layer K/V buffers (allocated once through the backend), pages of page_size positions,
// which pages each sequence holds, scratch slots for speculation-tree rows, and turning a Batch's rows into
// write slots and the paged attention layout. Must not: compute attention or read tensor contents (it
// only asks the backend to move accepted rows into place).
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
  static constexpr int kMaxTreeRows = 64;  // tree masks are 64-bit

  // Allocates room for `positions` sequence positions (rounded up to whole pages) plus kMaxTreeRows scratch
  // slots, for every layer of `spec`, stored as `dtype` (F32 or BF16).
  static Result<std::unique_ptr<KvCache>> create(Backend& backend, const KvSpec& spec, int64_t positions, DType dtype,
                                                 int page_size = 16);

  int32_t new_sequence();
  void free_sequence(int32_t seq);
  bool has_sequence(int32_t seq) const { return seqs_.count(seq) != 0; }
  int64_t length(int32_t seq) const;       // committed positions
  void trim(int32_t seq, int64_t length);  // keeps positions [0, length) and frees the pages past them
  // Takes the pages for positions [0, positions) now (the sequence's length is unchanged), so that the
  // sequence can later grow that far whatever other sequences do; trim() gives back what was not used.
  Status reserve(int32_t seq, int64_t positions);
  int64_t free_positions() const { return static_cast<int64_t>(free_pages_.size()) * page_size_; }
  int64_t capacity() const { return static_cast<int64_t>(n_pages_) * page_size_; }
  int page_size() const { return page_size_; }
  size_t bytes() const;

  // Fills the batch's KV placement. Linear rows (parent_row -1) must come in position order and continue
  // their sequence; they are committed to it at once. Tree rows (parent_row >= 0: an earlier row of the
  // same sequence, position = parent's + 1, row index < kMaxTreeRows) get scratch slots until
  // accept_tree_path(). On error nothing changes.
  Status plan(Batch& batch);
  // Commits the tree rows `path` of the last planned batch (each the child of the previous, the first a
  // child of a linear row) to their sequence: their K/V is copied from the scratch slots into the
  // sequence's next positions.
  Status accept_tree_path(const Batch& batch, std::span<const int32_t> path);

  std::span<const LayerKv> layers() const { return layers_; }

 private:
  struct Sequence {
    std::vector<int32_t> pages;
    int64_t length = 0;
  };
  KvCache(Backend& backend) : backend_(backend) {}
  int32_t slot_of(const Sequence& s, int64_t position) const {
    return s.pages[position / page_size_] * page_size_ + static_cast<int32_t>(position % page_size_);
  }
  Status grow(Sequence& s, int64_t length);  // pages for positions [0, length)

  Backend& backend_;
  int page_size_ = 16;
  int32_t n_pages_ = 0;
  int32_t scratch_base_ = 0;  // first of the kMaxTreeRows scratch slots
  std::vector<std::shared_ptr<DeviceBuffer>> buffers_;
  std::vector<LayerKv> layers_;
  std::vector<int32_t> free_pages_;
  std::unordered_map<int32_t, Sequence> seqs_;
  int32_t next_seq_ = 0;
  Tensor move_src_, move_dst_;  // (kMaxTreeRows) I32 in the backend's memory
};

}  // namespace helium
