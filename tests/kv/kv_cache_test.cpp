#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"

namespace helium {
namespace {

std::unique_ptr<KvCache> make_cache(Backend& backend, int64_t positions, int page_size = 4) {
  auto kv = KvCache::create(backend, KvSpec{2, 8}, positions, DType::F32, page_size);
  EXPECT_TRUE(kv.is_ok());
  return std::move(kv).value();
}

// The slots row r attends to, in order, expanded from the batch's paged layout.
std::vector<int32_t> attended(const Batch& b, int r) {
  std::vector<int32_t> out;
  const int32_t* table = b.block_tables.data() + static_cast<size_t>(b.row_table[r]) * b.table_width;
  for (int32_t p = 0; p < b.prefix_lens[r]; ++p) out.push_back(table[p / b.page_size] * b.page_size + p % b.page_size);
  if (!b.tree_masks.empty())
    for (int j = 0; j < 64; ++j)
      if ((b.tree_masks[r] >> j) & 1u) out.push_back(b.kv_write_slots[j]);
  return out;
}

TEST(KvCache, LinearRowsAttendToTheirPrefix) {
  CpuBackend backend(1);
  auto kv = make_cache(backend, 16);
  int32_t a = kv->new_sequence(), b = kv->new_sequence();
  Batch batch;
  batch.add(1, 0, a, false);
  batch.add(2, 1, a, true);
  batch.add(3, 0, b, true);
  ASSERT_TRUE(kv->plan(batch).is_ok());
  EXPECT_TRUE(batch.tree_masks.empty());
  EXPECT_EQ(attended(batch, 0), std::vector<int32_t>{batch.kv_write_slots[0]});
  EXPECT_EQ(attended(batch, 1), (std::vector<int32_t>{batch.kv_write_slots[0], batch.kv_write_slots[1]}));
  EXPECT_EQ(attended(batch, 2), std::vector<int32_t>{batch.kv_write_slots[2]});
  EXPECT_NE(batch.row_table[0], batch.row_table[2]);  // two sequences, two block tables
  EXPECT_EQ(kv->length(a), 2);
  EXPECT_EQ(kv->free_positions(), 8);  // two of four 4-position pages taken
  kv->trim(a, 1);
  EXPECT_EQ(kv->length(a), 1);
  kv->free_sequence(b);
  EXPECT_EQ(kv->free_positions(), 12);
}

TEST(KvCache, SequencesSpanPagesInOrder) {
  CpuBackend backend(1);
  auto kv = make_cache(backend, 64, 4);
  int32_t s = kv->new_sequence();
  Batch batch;
  for (int i = 0; i < 11; ++i) batch.add(i, i, s, i == 10);
  ASSERT_TRUE(kv->plan(batch).is_ok());
  std::vector<int32_t> expected(batch.kv_write_slots.begin(), batch.kv_write_slots.end());
  EXPECT_EQ(attended(batch, 10), expected);
  EXPECT_EQ(batch.table_width, 3);
  kv->trim(s, 4);  // keeps exactly one page
  EXPECT_EQ(kv->free_positions(), 60);
}

TEST(KvCache, TreeRowsAttendToAncestorsOnly) {
  CpuBackend backend(1);
  auto kv = make_cache(backend, 16);
  int32_t s = kv->new_sequence();
  Batch prefix;
  prefix.add(5, 0, s, false);
  ASSERT_TRUE(kv->plan(prefix).is_ok());
  Batch t;
  int root = t.add(6, 1, s, true);
  int x = t.add(7, 2, s, true, root);
  int y = t.add(8, 2, s, true, root);
  int xx = t.add(9, 3, s, true, x);
  ASSERT_TRUE(kv->plan(t).is_ok());
  const int32_t p0 = prefix.kv_write_slots[0];
  EXPECT_EQ(attended(t, xx), (std::vector<int32_t>{p0, t.kv_write_slots[root], t.kv_write_slots[x], t.kv_write_slots[xx]}));
  EXPECT_EQ(attended(t, y), (std::vector<int32_t>{p0, t.kv_write_slots[root], t.kv_write_slots[y]}));
  EXPECT_EQ(t.tree_masks[root], 0u);
  EXPECT_EQ(kv->length(s), 2);  // prefix + root; tree rows stay in scratch slots
  ASSERT_TRUE(kv->accept_tree_path(t, std::vector<int32_t>{x, xx}).is_ok());
  EXPECT_EQ(kv->length(s), 4);
  EXPECT_FALSE(kv->accept_tree_path(t, std::vector<int32_t>{xx}).is_ok());  // no longer extends the sequence
}

TEST(KvCache, BadPlansAreRefusedWithReasonsAndChangeNothing) {
  CpuBackend backend(1);
  auto kv = make_cache(backend, 4, 2);
  int32_t s = kv->new_sequence();
  Batch gap;
  gap.add(1, 3, s, true);
  auto st = kv->plan(gap);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("does not continue"), std::string::npos);
  Batch unknown;
  unknown.add(1, 0, 99, true);
  EXPECT_NE(kv->plan(unknown).message().find("unknown sequence"), std::string::npos);
  Batch big;
  for (int i = 0; i < 5; ++i) big.add(1, i, s, false);
  EXPECT_NE(kv->plan(big).message().find("KV cache is full"), std::string::npos);
  EXPECT_EQ(kv->length(s), 0);
  EXPECT_EQ(kv->free_positions(), 4);
  Batch bad_parent;
  bad_parent.add(1, 0, s, false);
  bad_parent.add(2, 5, s, false, 0);
  EXPECT_NE(kv->plan(bad_parent).message().find("parent row"), std::string::npos);
  EXPECT_EQ(kv->length(s), 0);
  EXPECT_FALSE(KvCache::create(backend, KvSpec{1, 8}, 4, DType::F16).is_ok());
}

}  // namespace
}  // namespace helium
