#include "sample/philox.h"

#include <gtest/gtest.h>

#include <set>

namespace helium {
namespace {

// Known-answer vectors of Philox4x32-10 published with Random123 (kat_vectors).
TEST(Philox, KnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (A4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (A4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, UniformIsAPureFunctionOfSeedAndPosition) {
  // Same inputs, same number, whatever was drawn before (no hidden stream).
  double a = philox_uniform(42, 7);
  for (int i = 0; i < 100; ++i) philox_uniform(42, static_cast<uint64_t>(i));
  EXPECT_EQ(a, philox_uniform(42, 7));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(43, 7));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(42, 8));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(42, 7 + (uint64_t{1} << 32)));  // high position bits count
}

TEST(Philox, UniformLooksUniform) {
  constexpr int kN = 100000, kBins = 10;
  int bins[kBins] = {};
  std::set<double> distinct;
  for (int i = 0; i < kN; ++i) {
    double u = philox_uniform(1234, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    bins[static_cast<int>(u * kBins)]++;
    distinct.insert(u);
  }
  for (int b : bins) EXPECT_NEAR(b, kN / kBins, 5 * 95);  // 5 sigma of a binomial(1e5, 0.1)
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kN));
}

}  // namespace
}  // namespace helium
