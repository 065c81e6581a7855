#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace helium {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 2, 3, 7, 64, 1000, 4097}) {
    for (int64_t grain : {1, 5, 100}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        ASSERT_LT(b, e);
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPool, ManyConsecutiveJobs) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job)
    pool.parallel_for(10, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 20000);
}

TEST(ThreadPool, NullPoolRunsInline) {
  int64_t seen = 0;
  parallel_for(nullptr, 17, 1, [&](int64_t b, int64_t e) { seen += e - b; });
  EXPECT_EQ(seen, 17);
}

}  // namespace
}  // namespace helium
