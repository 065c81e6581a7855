#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace helium {
namespace {

int32_t draw(const std::vector<float>& logits, const SamplingParams& p, double u, std::vector<int32_t> context = {},
             size_t output_len = 0) {
  SamplerScratch s;
  return sample_token(logits, p, context, output_len, u, s);
}

// Frequencies over a uniform grid of u values: exactly the inverse-CDF masses.
std::map<int32_t, int> histogram(const std::vector<float>& logits, const SamplingParams& p, int n = 10000) {
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) h[draw(logits, p, (i + 0.5) / n)]++;
  return h;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(draw({0.1f, 3.0f, -1.0f, 3.0f}, p, 0.99), 1);
  p.temperature = 1;
  p.top_k = 1;
  EXPECT_EQ(draw({0.1f, 3.0f, -1.0f, 3.0f}, p, 0.99), 1);
}

TEST(Sampler, InverseCdfFollowsSoftmax) {
  SamplingParams p;
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  auto h = histogram(logits, p);
  EXPECT_NEAR(h[0], 5000, 1);
  EXPECT_NEAR(h[1], 3000, 1);
  EXPECT_NEAR(h[2], 2000, 1);
  // Temperature 0.5 squares the odds: 25:9:4.
  p.temperature = 0.5f;
  h = histogram(logits, p, 38000);
  EXPECT_NEAR(h[0], 25000, 2);
  EXPECT_NEAR(h[1], 9000, 2);
  EXPECT_NEAR(h[2], 4000, 2);
}

TEST(Sampler, TopKTopPMinPTruncate) {
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p;
  p.top_k = 2;
  auto h = histogram(logits, p, 7000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_NEAR(h[0], 4000, 1);
  p = SamplingParams();
  p.top_p = 0.65f;  // 0.4 + 0.3 reaches it
  h = histogram(logits, p);
  EXPECT_EQ(h.size(), 2u);
  p = SamplingParams();
  p.min_p = 0.45f;  // keep p >= 0.18: tokens 0, 1, 2
  h = histogram(logits, p, 9000);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_NEAR(h[2], 2000, 1);
}

TEST(Sampler, RepetitionPenaltyFollowsHuggingFace) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  // Token 0 (logit 3, seen) becomes 1.5 < 2; token 2 (logit -1, seen) becomes -2.
  EXPECT_EQ(draw({3.0f, 2.0f, -1.0f}, p, 0.5, {0, 2}), 1);
  EXPECT_EQ(draw({3.0f, 2.0f, -1.0f}, p, 0.5, {2}), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSeeOnlyOutput) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.6f;
  // Token 0 appears twice in the output: 3.0 - 1.2 = 1.8 < 2.0.
  EXPECT_EQ(draw({3.0f, 2.0f}, p, 0.5, {1, 0, 0}, 2), 1);
  // The same tokens in the prompt only: no penalty.
  EXPECT_EQ(draw({3.0f, 2.0f}, p, 0.5, {0, 0, 1}, 1), 0);
  p = SamplingParams();
  p.temperature = 0;
  p.presence_penalty = 1.5f;
  EXPECT_EQ(draw({3.0f, 2.0f}, p, 0.5, {0}, 1), 1);
}

TEST(Sampler, LogitBiasApplies) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{2, 10.0f}};
  EXPECT_EQ(draw({3.0f, 2.0f, 0.0f}, p, 0.5), 2);
  p.logit_bias = {{0, -INFINITY}};
  EXPECT_NE(validate_sampling(p, 3), "");  // non-finite bias is refused
}

TEST(Sampler, ValidationNamesTheField) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_NE(validate_sampling(p, 10).find("top_p"), std::string::npos);
  p = SamplingParams();
  p.temperature = -1;
  EXPECT_NE(validate_sampling(p, 10).find("temperature"), std::string::npos);
  p = SamplingParams();
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(validate_sampling(p, 10).find("logit_bias"), std::string::npos);
  EXPECT_EQ(validate_sampling(SamplingParams(), 10), "");
}

TEST(StopStrings, MatchAcrossPiecesAndHoldBackPrefixes) {
  StopStrings s({"</end>", "STOP"});
  EXPECT_EQ(s.feed("hello </"), 6u);  // "</" may start "</end>": held back
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.feed("e"), 6u);
  EXPECT_EQ(s.feed("nd> more"), 6u);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), "</end>");
  StopStrings t({"STOP"});
  EXPECT_EQ(t.feed("no stop here ST"), 13u);
  EXPECT_EQ(t.feed("ART"), 18u);  // "START" is not a stop: released
  EXPECT_FALSE(t.stopped());
  StopStrings none({});
  EXPECT_EQ(none.feed("abc"), 3u);
}

}  // namespace
}  // namespace helium
