#include "core/candidate_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace helium {
namespace {

// rank_best writes what std::partial_sort_copy with ranks_before writes — the same candidates in the same
// order — on rows of every shape the sampler meets: smooth, peaked, flat (most x in a few buckets), many
// ties, signed zeros, ±inf, below and above its direct-sort sizes, for k from 0 past the row.
TEST(CandidateOrder, RankBestIsThePartialSortCopy) {
  std::mt19937 rng(17);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int size = trial % 10 == 0 ? 151936 : std::uniform_int_distribution<int>(1, 30000)(rng);
    const int kind = trial % 6;
    std::normal_distribution<float> normal(0.0f, kind == 2 ? 0.02f : kind == 1 ? 4.0f : 1.0f);
    std::vector<ScoredToken> c;
    for (int id = 0; id < size; ++id) {
      float x = normal(rng);
      if (kind == 3) x = static_cast<float>(std::uniform_int_distribution<int>(-3, 3)(rng));  // ties
      if (kind == 4) x = std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0f : -0.0f;     // signed zeros
      if (kind == 5 && id % 97 == 0) x = (id % 2 ? 1.0f : -1.0f) * INFINITY;
      if (std::uniform_int_distribution<int>(0, 3)(rng) != 0) c.emplace_back(x, id);  // gaps in the ids
    }
    std::shuffle(c.begin(), c.end(), rng);  // rank_best takes any order
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{256}, int64_t{1024}, int64_t{4096},
                      static_cast<int64_t>(c.size()), static_cast<int64_t>(c.size()) + 5}) {
      std::vector<ScoredToken> want(static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(c.size()))));
      std::partial_sort_copy(c.begin(), c.end(), want.begin(), want.end(), ranks_before);
      std::vector<ScoredToken> got;
      rank_best(c, k, got);
      ASSERT_EQ(got.size(), want.size()) << "trial " << trial << " k " << k;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].second, want[i].second) << "trial " << trial << " k " << k << " rank " << i;
        ASSERT_EQ(std::signbit(got[i].first), std::signbit(want[i].first)) << "trial " << trial << " rank " << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 60 * 8);
}

TEST(CandidateOrder, DescendingKeyOrdersLikeRanksBefore) {
  const float xs[] = {-INFINITY, -1e30f, -2.5f, -1e-40f, -0.0f, 0.0f, 1e-40f, 1.0f, 3.0e38f, INFINITY};
  for (float a : xs)
    for (float b : xs) {
      EXPECT_EQ(descending_key(a) < descending_key(b), a > b) << a << " " << b;
      EXPECT_EQ(descending_key(a) == descending_key(b), a == b) << a << " " << b;
    }
}

}  // namespace
}  // namespace helium
