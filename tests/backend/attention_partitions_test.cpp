// The CUDA decode attention's partition rule (backend/cuda/attention_partitions.h), plain C++ shared by the
// kernels and the memory plan: partition sizes and counts at each tier's edges, the largest count a context
// can need, and the parsing of HELIUM_CUDA_ATTN_PARTITIONS (what it accepts, what it refuses untouched).
#include "backend/cuda/attention_partitions.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace helium::cuda {
namespace {

TEST(AttentionPartitions, SizesAndCountsAtTheTierEdges) {
  const PartitionTiers t;  // 64 keys up to 2K, 128 up to 4K, 256 up to 16K, 512 beyond
  const struct {
    int keys, partition_keys, partitions;
  } cases[] = {{1, 64, 1},       {64, 64, 1},         {65, 64, 2},          {2048, 64, 32},
               {2049, 128, 17},  {4096, 128, 32},     {4097, 256, 17},      {16384, 256, 64},
               {16385, kMaxPartitionKeys, 33},        {32768, kMaxPartitionKeys, 64}};
  for (const auto& c : cases) {
    EXPECT_EQ(partition_keys(c.keys, t), c.partition_keys) << c.keys << " keys";
    EXPECT_EQ(partition_count(c.keys, t), c.partitions) << c.keys << " keys";
  }
}

TEST(AttentionPartitions, MostPartitionsIsTheMaximumOverEveryKeyCount) {
  for (const PartitionTiers t :
       {PartitionTiers{}, PartitionTiers{0, 0, 0}, PartitionTiers{64, 128, 256},
        PartitionTiers{1000, 1000, 5000}, PartitionTiers{1 << 20, 1 << 20, 1 << 20},
        PartitionTiers{2048, 4096, 16384, 1536}, PartitionTiers{64, 128, 256, 100}}) {
    for (int64_t max_keys : {1, 63, 64, 65, 1000, 2048, 2049, 5000, 9999, 16384, 20000}) {
      int64_t most = 0;
      for (int n = 1; n <= max_keys; ++n) most = std::max<int64_t>(most, partition_count(n, t));
      EXPECT_EQ(max_partition_count(max_keys, t), most)
          << t.tiny_end << "," << t.small_end << "," << t.medium_end << "," << t.large_end << " at "
          << max_keys << " keys";
    }
  }
  EXPECT_EQ(max_partition_count(0, PartitionTiers{}), 0);
}

TEST(AttentionPartitions, ParsesTheOverrideAndRefusesAnythingElseUntouched) {
  PartitionTiers t;
  ASSERT_TRUE(parse_partition_tiers("0,0", t));
  EXPECT_EQ(t.small_end, 0);
  EXPECT_EQ(t.medium_end, 0);
  EXPECT_EQ(t.large_end, PartitionTiers{}.large_end);  // two numbers keep the default third
  ASSERT_TRUE(parse_partition_tiers("1024,4096,8192", t));
  EXPECT_EQ(t.small_end, 1024);
  EXPECT_EQ(t.medium_end, 4096);
  EXPECT_EQ(t.large_end, 8192);
  ASSERT_TRUE(parse_partition_tiers("100,50000", t));  // medium past the default large: large follows it
  EXPECT_EQ(t.large_end, 50000);
  EXPECT_EQ(t.tiny_end, 0);
  ASSERT_TRUE(parse_partition_tiers("1536,2048,4096,16384", t));  // four: 32-key partitions first
  EXPECT_EQ(t.tiny_end, 1536);
  EXPECT_EQ(t.small_end, 2048);
  EXPECT_EQ(t.medium_end, 4096);
  EXPECT_EQ(t.large_end, 16384);
  EXPECT_EQ(partition_keys(1536, t), 32);
  EXPECT_EQ(partition_keys(1537, t), 64);
  EXPECT_EQ(partition_count(1025, t), 33);
  ASSERT_TRUE(parse_partition_tiers("1024,4096", t));
  EXPECT_EQ(t.tiny_end, 0);  // fewer than four: none

  for (const char* bad : {"", "64", "64,", ",64", "64,128x", "64,128,512,9", "0,8,4", "128,64", "-1,64",
                          "+64,128", " 64,128", "64, 128", "64,,128", "2000000000,2000000000", "a,b",
                          "4096,2048,4096,16384", "1,2,3,4,5", "1,2,3,4,"}) {
    PartitionTiers u{1, 2, 3};
    EXPECT_FALSE(parse_partition_tiers(bad, u)) << "'" << bad << "'";
    EXPECT_EQ(u.small_end, 1) << bad;
    EXPECT_EQ(u.medium_end, 2) << bad;
    EXPECT_EQ(u.large_end, 3) << bad;
    EXPECT_EQ(u.tiny_end, 0) << bad;
  }
  EXPECT_FALSE(parse_partition_tiers(nullptr, t));
}

}  // namespace
}  // namespace helium::cuda
