// RoPE frequency tables: the formulas of each rope type against direct evaluation, and errors. (The
// llama3 and yarn tables are also checked end to end by the golden models.)
#include "models/rope.h"

#include <gtest/gtest.h>

#include <cmath>

namespace helium {
namespace {

Result<RopeFrequencies> rope_for(const nlohmann::json& config, int head_dim) {
  ConfigReader r(config, "config.json");
  return compute_rope_frequencies(r, head_dim);
}

TEST(Rope, DefaultMatchesThetaPowers) {
  auto r = rope_for({{"rope_theta", 1e6}}, 128);
  ASSERT_TRUE(r.is_ok());
  ASSERT_EQ(r->inv_freq.size(), 64u);
  EXPECT_EQ(r->rot_dim, 128);
  for (int j = 0; j < 64; ++j) EXPECT_NEAR(r->inv_freq[j], std::pow(1e6, -2.0 * j / 128), 1e-6 * std::pow(1e6, -2.0 * j / 128));
  EXPECT_EQ(r->attention_scaling, 1.0f);
}

TEST(Rope, OldAndNewConfigKeysAgree) {
  auto a = rope_for({{"rope_theta", 5e5}, {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}}, 64);
  auto b = rope_for({{"rope_parameters", {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 5e5}}}}, 64);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->inv_freq, b->inv_freq);
  auto plain = rope_for({{"rope_theta", 5e5}}, 64);
  for (size_t j = 0; j < plain->inv_freq.size(); ++j) EXPECT_FLOAT_EQ(a->inv_freq[j], plain->inv_freq[j] / 4.0f);
}

TEST(Rope, PartialRotaryRotatesAFraction) {
  auto r = rope_for({{"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}, 256);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->rot_dim, 64);
  ASSERT_EQ(r->inv_freq.size(), 32u);
  EXPECT_NEAR(r->inv_freq[1], std::pow(1e7, -2.0 / 64), 2e-7);  // float32 table: within an ulp or two
}

TEST(Rope, Llama3KeepsHighAndScalesLowFrequencies) {
  nlohmann::json c = {{"rope_parameters",
                       {{"rope_type", "llama3"}, {"rope_theta", 5e5}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}}}};
  auto r = rope_for(c, 128);
  auto plain = rope_for({{"rope_theta", 5e5}}, 128);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->inv_freq[0], plain->inv_freq[0]);                 // wavelength 2π: untouched
  EXPECT_FLOAT_EQ(r->inv_freq[63], plain->inv_freq[63] / 8.0f);  // longest wavelength: divided by factor
}

TEST(Rope, YarnSetsAttentionScaling) {
  nlohmann::json c = {{"max_position_embeddings", 131072},
                      {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}}},
                      {"rope_theta", 1e6}};
  auto r = rope_for(c, 128);
  ASSERT_TRUE(r.is_ok());
  EXPECT_NEAR(r->attention_scaling, 0.1 * std::log(4.0) + 1.0, 1e-6);
}

TEST(Rope, ErrorsNameTheProblem) {
  auto r = rope_for({{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}}}, 64);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error_message().find("dynamic"), std::string::npos);
  auto l = rope_for({{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 2.0}}}}, 64);
  ASSERT_FALSE(l.is_ok());
  EXPECT_NE(l.error_message().find("low_freq_factor"), std::string::npos);
}

}  // namespace
}  // namespace helium
