// Sampled decoding takes one of two paths: a request that samples on the raw logits with top_k off or up
// to 256 gets its candidates selected by the backend (Backend::select_candidates; sample_from_candidates;
// without top_k the best 256 and the row's softmax total, the logits copied when a draw reaches past
// them), any other copies the logits (sample_token). Both must write the same tokens for the same seed.
#include <gtest/gtest.h>

#include "engine_fixture.h"

namespace helium {
namespace {

using testing::greedy_request;
using testing::load_default_engine;

void expect_both_paths_write_the_same_tokens(Engine& engine) {
  struct Setting {
    float temperature;
    int top_k;
    float top_p, min_p;
  };
  // Without top_k: top_p alone (what most agents send), plain temperature, min_p, and a temperature high
  // enough that draws reach past the best 256 (the logits copied after all).
  for (const Setting s : {Setting{0.7f, 20, 0.95f, 0.0f}, Setting{1.0f, 5, 1.0f, 0.0f}, Setting{1.5f, 256, 0.9f, 0.05f},
                          Setting{0.3f, 2, 1.0f, 0.0f}, Setting{0.7f, 0, 0.95f, 0.0f}, Setting{1.0f, 0, 1.0f, 0.0f},
                          Setting{1.0f, 0, 1.0f, 0.1f}, Setting{4.0f, 0, 0.99f, 0.0f}}) {
    for (uint64_t seed : {uint64_t{1}, uint64_t{99}}) {
      GenerationRequest candidates = greedy_request(engine, "def quicksort(items):\n", 40);
      candidates.sampling.temperature = s.temperature;
      candidates.sampling.top_k = s.top_k;
      candidates.sampling.top_p = s.top_p;
      candidates.sampling.min_p = s.min_p;
      candidates.sampling.seed = seed;
      ASSERT_TRUE(candidates.sampling.device_candidates(Backend::kMaxSelectTopK));
      // A zero bias changes no logit but makes the request take the logits path.
      GenerationRequest logits = candidates;
      logits.sampling.logit_bias = {{7, 0.0f}};
      ASSERT_FALSE(logits.sampling.device_candidates(Backend::kMaxSelectTopK));
      auto a = engine.generate(candidates);
      auto b = engine.generate(logits);
      ASSERT_TRUE(a && b);
      EXPECT_EQ(a->tokens, b->tokens) << engine.backend_name() << ": T " << s.temperature << " top_k " << s.top_k
                                      << " top_p " << s.top_p << " min_p " << s.min_p << " seed " << seed;
      EXPECT_EQ(a->tokens.size(), 40u);
    }
  }
}

TEST(SamplingPaths, DeviceCandidatesWriteWhatTheLogitsWrite) {
  auto engine = load_default_engine();
  ASSERT_TRUE(engine);
  expect_both_paths_write_the_same_tokens(*engine);
}

// The same on the GPU (select_candidates' CUDA kernels, the device's softmax totals, the logits copied
// after the forward when a draw needs them); skipped without one.
TEST(SamplingPaths, DeviceCandidatesWriteWhatTheLogitsWriteOnTheGpu) {
  auto engine = load_default_engine(1024, 4, "auto");
  ASSERT_TRUE(engine);
  if (!testing::on_gpu(*engine)) GTEST_SKIP() << "no GPU (backend " << engine->backend_name() << ")";
  expect_both_paths_write_the_same_tokens(*engine);
}

}  // namespace
}  // namespace helium
