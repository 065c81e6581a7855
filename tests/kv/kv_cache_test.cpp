#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"

namespace helium {
namespace {

std::unique_ptr<KvCache> make_cache(Backend& backend, int64_t slots) {
  auto kv = KvCache::create(backend, KvSpec{2, 8}, slots, DType::F32);
  EXPECT_TRUE(kv.is_ok());
  return std::move(kv).value();
}

std::vector<int32_t> attended(const Batch& b, int r) {
  return std::vector<int32_t>(b.attend_slots.begin() + b.attend_offsets[r], b.attend_slots.begin() + b.attend_offsets[r + 1]);
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
  EXPECT_EQ(attended(batch, 0), std::vector<int32_t>{batch.kv_write_slots[0]});
  EXPECT_EQ(attended(batch, 1), (std::vector<int32_t>{batch.kv_write_slots[0], batch.kv_write_slots[1]}));
  EXPECT_EQ(attended(batch, 2), std::vector<int32_t>{batch.kv_write_slots[2]});
  EXPECT_EQ(kv->length(a), 2);
  EXPECT_EQ(kv->free_slots(), 13);
  kv->trim(a, 1);
  EXPECT_EQ(kv->length(a), 1);
  kv->free_sequence(b);
  EXPECT_EQ(kv->free_slots(), 15);
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
  EXPECT_EQ(kv->length(s), 2);  // prefix + root; tree rows pending
  ASSERT_TRUE(kv->accept_tree_path(t, std::vector<int32_t>{x, xx}).is_ok());
  EXPECT_EQ(kv->length(s), 4);
  EXPECT_EQ(kv->free_slots(), 12);  // y's scratch slot came back
}

TEST(KvCache, BadPlansAreRefusedWithReasons) {
  CpuBackend backend(1);
  auto kv = make_cache(backend, 4);
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
  Batch bad_parent;
  bad_parent.add(1, 0, s, false);
  bad_parent.add(2, 5, s, false, 0);
  EXPECT_NE(kv->plan(bad_parent).message().find("parent row"), std::string::npos);
  EXPECT_FALSE(KvCache::create(backend, KvSpec{1, 8}, 4, DType::F16).is_ok());
}

}  // namespace
}  // namespace helium
