#include "kv/kv_cache.h"

#include <algorithm>
#include <map>
#include <string>

namespace helium {

Result<std::unique_ptr<KvCache>> KvCache::create(Backend& backend, const KvSpec& spec, int64_t positions, DType dtype,
                                                 int page_size) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    return Status::error("KV cache dtype must be F32 or BF16, not " + std::string(dtype_name(dtype)));
  if (page_size <= 0) return Status::error("KV page size must be positive");
  if (positions <= 0 || positions > INT32_MAX / 2) return Status::error("KV cache needs a positive position count");
  std::unique_ptr<KvCache> cache(new KvCache(backend));
  cache->page_size_ = page_size;
  cache->n_pages_ = static_cast<int32_t>((positions + page_size - 1) / page_size);
  cache->scratch_base_ = cache->n_pages_ * page_size;
  const int64_t slots = int64_t{cache->scratch_base_} + kMaxTreeRows;
  const size_t bytes = static_cast<size_t>(slots * spec.kv_dim) * dtype_bytes(dtype);
  for (int l = 0; l < spec.layers; ++l) {
    LayerKv kv;
    for (Tensor* t : {&kv.k, &kv.v}) {
      auto buffer = backend.allocate(bytes);
      if (!buffer.is_ok())
        return buffer.status().with_context("KV cache (" + std::to_string(positions) + " positions x " +
                                            std::to_string(spec.layers) + " layers)");
      *t = Tensor(buffer.value()->data(), dtype, {slots, spec.kv_dim});
      cache->buffers_.push_back(std::move(buffer).value());
    }
    cache->layers_.push_back(kv);
  }
  HELIUM_ASSIGN_OR_RETURN(auto moves, backend.allocate(2 * kMaxTreeRows * sizeof(int32_t)));
  cache->buffers_.push_back(moves);
  cache->move_src_ = Tensor(moves->data(), DType::I32, {kMaxTreeRows});
  cache->move_dst_ = Tensor(static_cast<int32_t*>(moves->data()) + kMaxTreeRows, DType::I32, {kMaxTreeRows});
  // Hand out low pages first: a short conversation stays in a compact region.
  for (int32_t p = cache->n_pages_ - 1; p >= 0; --p) cache->free_pages_.push_back(p);
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
  free_pages_.insert(free_pages_.end(), it->second.pages.rbegin(), it->second.pages.rend());
  seqs_.erase(it);
}

int64_t KvCache::length(int32_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.length;
}

void KvCache::trim(int32_t seq, int64_t length) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  Sequence& s = it->second;
  s.length = std::clamp<int64_t>(length, 0, s.length);
  const size_t keep = static_cast<size_t>((s.length + page_size_ - 1) / page_size_);
  while (s.pages.size() > keep) {
    free_pages_.push_back(s.pages.back());
    s.pages.pop_back();
  }
}

Status KvCache::reserve(int32_t seq, int64_t positions) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return Status::error("KV cache: no sequence " + std::to_string(seq));
  return grow(it->second, positions);
}

Status KvCache::grow(Sequence& s, int64_t length) {
  const size_t need = static_cast<size_t>((length + page_size_ - 1) / page_size_);
  if (need > s.pages.size() + free_pages_.size())
    return Status::error("KV cache is full: " + std::to_string(length) + " positions need " + std::to_string(need) +
                         " pages, " + std::to_string(free_pages_.size()) + " free of " + std::to_string(n_pages_) +
                         " (" + std::to_string(page_size_) + " positions each)");
  while (s.pages.size() < need) {
    s.pages.push_back(free_pages_.back());
    free_pages_.pop_back();
  }
  return Status::ok();
}

Status KvCache::plan(Batch& b) {
  const int32_t rows = b.rows();
  // Check everything before changing any state.
  std::map<int32_t, int64_t> new_length;  // sequence -> length after the batch's linear rows
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t seq = b.seq_ids[r], pos = b.positions[r], parent = b.parent_rows[r];
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return Status::error("row " + std::to_string(r) + ": unknown sequence " + std::to_string(seq));
    if (parent < 0) {
      int64_t& len = new_length.try_emplace(seq, it->second.length).first->second;
      if (pos != len)
        return Status::error("row " + std::to_string(r) + ": position " + std::to_string(pos) +
                             " does not continue sequence " + std::to_string(seq) + " of length " + std::to_string(len));
      ++len;
    } else {
      if (parent >= r || b.seq_ids[parent] != seq || b.positions[parent] + 1 != pos)
        return Status::error("row " + std::to_string(r) + ": parent row " + std::to_string(parent) +
                             " is not an earlier row of the same sequence one position back");
      if (r >= kMaxTreeRows)
        return Status::error("row " + std::to_string(r) + ": tree rows must be among the first " +
                             std::to_string(kMaxTreeRows) + " rows of a batch");
    }
  }
  int64_t pages_needed = 0;
  for (const auto& [seq, len] : new_length) {
    const Sequence& s = seqs_.at(seq);
    pages_needed += std::max<int64_t>(0, (len + page_size_ - 1) / page_size_ - static_cast<int64_t>(s.pages.size()));
  }
  if (pages_needed > static_cast<int64_t>(free_pages_.size()))
    return Status::error("KV cache is full: the batch needs " + std::to_string(pages_needed) + " more pages, " +
                         std::to_string(free_pages_.size()) + " free of " + std::to_string(n_pages_) + " (" +
                         std::to_string(page_size_) + " positions each)");
  for (const auto& [seq, len] : new_length) HELIUM_RETURN_IF_ERROR(grow(seqs_.at(seq), len));

  b.page_size = page_size_;
  b.kv_write_slots.assign(rows, -1);
  b.prefix_lens.assign(rows, 0);
  b.row_table.assign(rows, 0);
  b.tree_masks.clear();
  std::map<int32_t, int32_t> table_of;  // sequence -> table index
  for (int32_t r = 0; r < rows; ++r) table_of.try_emplace(b.seq_ids[r], static_cast<int32_t>(table_of.size()));
  bool any_tree = false;
  for (int32_t r = 0; r < rows; ++r) {
    Sequence& s = seqs_.at(b.seq_ids[r]);
    b.row_table[r] = table_of.at(b.seq_ids[r]);
    if (b.parent_rows[r] < 0) {
      b.kv_write_slots[r] = slot_of(s, b.positions[r]);
      b.prefix_lens[r] = b.positions[r] + 1;
    } else {
      any_tree = true;
      b.kv_write_slots[r] = scratch_base_ + r;
    }
  }
  if (any_tree) {
    b.tree_masks.assign(rows, 0);
    for (int32_t r = 0; r < rows; ++r) {
      const int32_t parent = b.parent_rows[r];
      if (parent < 0) continue;
      // The prefix ends at the first linear ancestor (the root); the mask holds the tree rows after it.
      b.tree_masks[r] = (b.parent_rows[parent] >= 0 ? b.tree_masks[parent] : 0) | (uint64_t{1} << r);
      b.prefix_lens[r] = b.parent_rows[parent] >= 0 ? b.prefix_lens[parent] : b.positions[parent] + 1;
    }
  }
  for (auto& [seq, len] : new_length) seqs_.at(seq).length = len;
  b.n_tables = static_cast<int32_t>(table_of.size());
  b.table_width = 1;
  for (const auto& [seq, t] : table_of)
    b.table_width = std::max<int32_t>(b.table_width, static_cast<int32_t>(seqs_.at(seq).pages.size()));
  b.block_tables.assign(static_cast<size_t>(b.n_tables) * b.table_width, 0);
  for (const auto& [seq, t] : table_of) {
    const auto& pages = seqs_.at(seq).pages;
    std::copy(pages.begin(), pages.end(), b.block_tables.begin() + static_cast<int64_t>(t) * b.table_width);
  }
  return Status::ok();
}

Status KvCache::accept_tree_path(const Batch& b, std::span<const int32_t> path) {
  if (path.empty()) return Status::ok();
  if (path.size() > static_cast<size_t>(kMaxTreeRows)) return Status::error("accept_tree_path: path too long");
  const int32_t seq = b.seq_ids[path[0]];
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return Status::error("accept_tree_path: unknown sequence");
  Sequence& s = it->second;
  for (size_t i = 0; i < path.size(); ++i) {
    const int32_t r = path[i];
    if (r < 0 || r >= b.rows() || b.parent_rows[r] < 0 || b.seq_ids[r] != seq ||
        (i > 0 && b.parent_rows[r] != path[i - 1]) || (i == 0 && b.parent_rows[b.parent_rows[r]] >= 0) ||
        b.positions[r] != s.length + static_cast<int64_t>(i))
      return Status::error("accept_tree_path: row " + std::to_string(r) + " does not extend the sequence");
  }
  HELIUM_RETURN_IF_ERROR(grow(s, s.length + static_cast<int64_t>(path.size())));
  std::vector<int32_t> src, dst;
  for (size_t i = 0; i < path.size(); ++i) {
    src.push_back(b.kv_write_slots[path[i]]);
    dst.push_back(slot_of(s, s.length + static_cast<int64_t>(i)));
  }
  const int64_t n = static_cast<int64_t>(path.size());
  Tensor src_t(move_src_.data, DType::I32, {n}), dst_t(move_dst_.data, DType::I32, {n});
  backend_.copy_to_device(src_t, src.data());
  backend_.copy_to_device(dst_t, dst.data());
  for (const LayerKv& kv : layers_) {
    backend_.copy_rows(kv.k, src_t, dst_t);
    backend_.copy_rows(kv.v, src_t, dst_t);
  }
  s.length += n;
  return Status::ok();
}

}  // namespace helium
