#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace helium {
namespace {

// bf16/f16 conversions must match IEEE round-to-nearest-even exactly: compare against the value that
// is nearest among all representable neighbours, over every 16-bit pattern and a spread of floats.
TEST(DType, Bf16RoundTripIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_bf16(f), h) << std::hex << h;
  }
}

TEST(DType, F16RoundTripIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(DType, F16RoundsToNearestEven) {
  // Walk floats between neighbouring f16 values (normal and subnormal ranges) and check the rounding.
  for (uint32_t h = 0; h < 0x7bff; h += 7) {
    float lo = f16_to_f32(static_cast<uint16_t>(h));
    float hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    float mid = lo + (hi - lo) / 2;  // exact in f32
    EXPECT_EQ(f32_to_f16(mid), (h & 1) ? h + 1 : h) << std::hex << h;
    EXPECT_EQ(f32_to_f16(std::nextafter(mid, hi)), h + 1);
    EXPECT_EQ(f32_to_f16(std::nextafter(mid, lo)), h);
  }
  EXPECT_EQ(f32_to_f16(70000.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-70000.0f), 0xfc00);
  EXPECT_EQ(f32_to_f16(1e-9f), 0);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  float half_ulp_above_one;  // 1 + 2^-8: exactly between 0x3f80 and 0x3f81 -> even (0x3f80)
  uint32_t bits = 0x3f808000u;
  std::memcpy(&half_ulp_above_one, &bits, 4);
  EXPECT_EQ(f32_to_bf16(half_ulp_above_one), 0x3f80);
  bits = 0x3f818000u;  // between 0x3f81 and 0x3f82 -> 0x3f82
  std::memcpy(&half_ulp_above_one, &bits, 4);
  EXPECT_EQ(f32_to_bf16(half_ulp_above_one), 0x3f82);
}

TEST(DType, TableNamesRoundTrip) {
  for (const auto& info : kDTypeTable) {
    auto back = dtype_from_name(info.name);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, info.dtype);
  }
  EXPECT_FALSE(dtype_from_name("F8_E4M3").has_value());
}

}  // namespace
}  // namespace helium
