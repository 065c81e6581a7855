// rms_norm against a double-precision reference: plain and zero-centred weights in every dtype, odd
// dims, in place, and per-head views.
#include <cmath>
#include <vector>

#include "cpu_test_util.h"

namespace helium::test {
namespace {

// The sum of squares of dim terms has relative error <= dim·u; the mean, +eps, sqrt, reciprocal and the
// two products add a few u; the square root halves the first term. Bound per element, relative to the
// exact result: (dim / 2 + 8) · u, doubled for margin: (dim + 16) · u. A wrong weight index or a missing
// term is off by far more.
void expect_rms_norm_close(const std::vector<float>& x, const std::vector<float>& w, float eps, bool zero_centred,
                           const std::vector<float>& y, int64_t rows, int64_t dim, const std::string& what) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double exact = x[r * dim + i] * inv * (zero_centred ? 1.0 + w[i] : w[i]);
      ASSERT_LE(std::fabs(y[r * dim + i] - exact), (dim + 16) * kF32Unit * std::fabs(exact) + 1e-30)
          << what << " row " << r << " i " << i << ": got " << y[r * dim + i] << ", exact " << exact;
    }
  }
}

class RmsNormTest : public CpuIsaTest {};

TEST_P(RmsNormTest, MatchesDoubleReference) {
  auto cpu = backend();
  std::mt19937 rng(11);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t dim : {1, 3, 17, 129, 1000, 1024}) {
      for (int64_t rows : {1, 2, 5, 31, 67}) {
        for (bool zero_centred : {false, true}) {
          std::vector<float> x = random_floats(rng, rows * dim, -3.0f, 3.0f);
          TypedData w(dtype, random_floats(rng, dim, -1.5f, 1.5f));
          std::vector<float> y(rows * dim, NAN);
          cpu->rms_norm(view(x, {rows, dim}), w.tensor({dim}), 1e-6f, zero_centred, view(y, {rows, dim}));
          expect_rms_norm_close(x, w.values, 1e-6f, zero_centred, y, rows, dim,
                                std::string(dtype_name(dtype)) + " dim " + std::to_string(dim));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(RmsNormTest, InPlaceEqualsOutOfPlace) {
  auto cpu = backend();
  std::mt19937 rng(12);
  const int64_t rows = 7, dim = 129;
  std::vector<float> x = random_floats(rng, rows * dim);
  TypedData w(DType::BF16, random_floats(rng, dim));
  std::vector<float> y(rows * dim);
  cpu->rms_norm(view(x, {rows, dim}), w.tensor({dim}), 1e-5f, false, view(y, {rows, dim}));
  cpu->rms_norm(view(x, {rows, dim}), w.tensor({dim}), 1e-5f, false, view(x, {rows, dim}));
  EXPECT_TRUE(same_bits(x.data(), y.data(), x.size()));
}

// Per-head norm (Qwen3's q_norm/k_norm): x viewed as (rows, heads, head_dim) with w (head_dim).
TEST_P(RmsNormTest, PerHeadView) {
  auto cpu = backend();
  std::mt19937 rng(13);
  const int64_t rows = 5, heads = 6, head_dim = 128;
  std::vector<float> x = random_floats(rng, rows * heads * head_dim);
  TypedData w(DType::F32, random_floats(rng, head_dim));
  std::vector<float> y(x.size(), NAN);
  cpu->rms_norm(view(x, {rows, heads, head_dim}), w.tensor({head_dim}), 1e-6f, false,
                view(y, {rows, heads, head_dim}));
  expect_rms_norm_close(x, w.values, 1e-6f, false, y, rows * heads, head_dim, "per head");
}

INSTANTIATE_TEST_SUITE_P(Isa, RmsNormTest, testing::ValuesIn(all_isas()), isa_param_name);

}  // namespace
}  // namespace helium::test
