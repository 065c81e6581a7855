// rope against a double-precision reference: partial rotary, positions up to 32K, attention_scaling != 1.
#include <cmath>
#include <vector>

#include "cpu_test_util.h"

namespace helium::test {
namespace {

std::vector<float> inv_freq_table(int rot_dim, double base) {
  std::vector<float> f(rot_dim / 2);
  for (int i = 0; i < rot_dim / 2; ++i) f[i] = static_cast<float>(std::pow(base, -2.0 * i / rot_dim));
  return f;
}

// The angle is p · inv_freq rounded to f32, as the Hugging Face reference computes it (rope.cpp says
// why), so the reference does the same and takes cos/sin in double from there. What remains is the
// rounding of cos, sin, the scaling and the two products and one sum per output: each output is within
// 6 u of (|x1| + |x2|) · |scaling|.
void check_rope(CpuBackend& cpu, int64_t rows, int heads, int head_dim, int rot_dim, float scaling,
                const std::vector<int32_t>& positions_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x = random_floats(rng, rows * heads * head_dim, -2.0f, 2.0f);
  const std::vector<float> original = x;
  std::vector<float> inv_freq = inv_freq_table(rot_dim, 1e6);
  std::vector<int32_t> positions = positions_in;
  const RopeParams params{head_dim, rot_dim, scaling};
  cpu.rope(view(x, {rows, heads * int64_t{head_dim}}), heads, view(positions, {rows}),
           view(inv_freq, {rot_dim / 2}), params);
  const int half = rot_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      const float* in = original.data() + (r * heads + h) * head_dim;
      const float* out = x.data() + (r * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<float>(positions[r]) * inv_freq[i];  // f32 product, as documented
        const double c = std::cos(angle) * scaling, s = std::sin(angle) * scaling;
        const double y1 = in[i] * c - in[i + half] * s, y2 = in[i + half] * c + in[i] * s;
        const double tolerance = 6 * kF32Unit * (std::fabs(in[i]) + std::fabs(in[i + half])) * std::fabs(scaling);
        ASSERT_LE(std::fabs(out[i] - y1), tolerance) << "row " << r << " head " << h << " i " << i;
        ASSERT_LE(std::fabs(out[i + half] - y2), tolerance) << "row " << r << " head " << h << " i " << i + half;
      }
      // Dimensions past rot_dim pass through untouched.
      ASSERT_TRUE(same_bits(in + rot_dim, out + rot_dim, head_dim - rot_dim)) << "row " << r << " head " << h;
    }
  }
}

class RopeTest : public CpuIsaTest {};

TEST_P(RopeTest, FullRotaryShortPositions) {
  auto cpu = backend();
  std::vector<int32_t> positions;
  for (int32_t p = 0; p < 67; ++p) positions.push_back(p);
  check_rope(*cpu, 67, 4, 128, 128, 1.0f, positions, 21);
}

TEST_P(RopeTest, PartialRotaryWithScalingUpTo32K) {
  auto cpu = backend();
  std::vector<int32_t> positions = {0, 1, 7, 4095, 8191, 16383, 20000, 32767, 32768, 12345, 31999};
  const int64_t rows = static_cast<int64_t>(positions.size());
  check_rope(*cpu, rows, 3, 80, 20, 1.2f, positions, 22);   // phi-style: a quarter of each head rotates
  check_rope(*cpu, rows, 2, 128, 64, 0.9f, positions, 23);  // half of each head
  check_rope(*cpu, rows, 5, 64, 2, 1.0f, positions, 24);    // one pair
}

// At 32K the f32 rounding of the angle matters: computing it in double would move the result by far more
// than the tolerance above, so the test would catch a kernel that changed the convention.
TEST(RopeConvention, AngleRoundingToF32IsVisibleAt32K) {
  const int32_t p = 32767;
  const std::vector<float> inv_freq = inv_freq_table(128, 1e6);
  double largest = 0.0;
  for (float f : inv_freq) {
    const double in_f32 = static_cast<float>(p) * f, in_double = static_cast<double>(p) * f;
    largest = std::max(largest, std::fabs(std::cos(in_f32) - std::cos(in_double)));
  }
  EXPECT_GT(largest, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Isa, RopeTest, testing::ValuesIn(all_isas()), isa_param_name);

}  // namespace
}  // namespace helium::test
