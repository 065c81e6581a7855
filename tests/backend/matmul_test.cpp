// Matmul against a double-precision reference, for every weight dtype and ISA, over odd shapes.
#include <cmath>
#include <vector>

#include "cpu_test_util.h"

namespace helium::test {
namespace {

struct MatmulCase {
  int64_t k, n;
};

// The error bound of any f32 summation order (with or without FMA) of k products, plus the bias
// addition: |y - exact| <= (k + 1) · u · (Σ|x_i w_i| + |bias|), u the f32 unit roundoff. The weights are
// compared as the f32 values the kernel sees (F16/BF16 widen exactly), so the bound is the same for every
// weight dtype: only the accumulation rounds. A wrong or missing term moves y by about |x_i w_i|, far
// more than k · u · Σ|x w| (6e-5 of the sum at k = 1000).
void expect_matmul_close(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* bias,
                         const std::vector<float>& y, int64_t rows, int64_t n, int64_t k, const std::string& what) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        const double term = static_cast<double>(x[r * k + i]) * w[j * k + i];
        exact += term;
        magnitude += std::fabs(term);
      }
      if (bias) {
        exact += (*bias)[j];
        magnitude += std::fabs((*bias)[j]);
      }
      const double tolerance = static_cast<double>(k + 1) * kF32Unit * magnitude;
      ASSERT_LE(std::fabs(y[r * n + j] - exact), tolerance)
          << what << " row " << r << " feature " << j << ": got " << y[r * n + j] << ", exact " << exact;
    }
  }
}

class MatmulTest : public CpuIsaTest {};

TEST_P(MatmulTest, MatchesDoubleReferenceOverOddShapes) {
  auto cpu = backend();
  std::mt19937 rng(1);
  const int64_t max_rows = 67;
  const std::vector<int64_t> row_counts = {1, 2, 3, 4, 5, 7, 8, 13, 16, 33, 64, 67};
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t k : {1, 3, 17, 129, 1000}) {
      for (int64_t n : {1, 5, 63, 257}) {
        std::vector<float> x = random_floats(rng, max_rows * k);
        TypedData w(dtype, random_floats(rng, n * k));
        for (int64_t rows : row_counts) {
          std::vector<float> y(rows * n, NAN);
          cpu->matmul(view(x, {rows, k}), w.tensor({n, k}), Tensor(), view(y, {rows, n}));
          expect_matmul_close(x, w.values, nullptr, y, rows, n, k,
                              std::string(dtype_name(dtype)) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                                  " rows=" + std::to_string(rows));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(MatmulTest, BiasInEveryDtype) {
  auto cpu = backend();
  std::mt19937 rng(2);
  const int64_t rows = 9, k = 129, n = 63;
  std::vector<float> x = random_floats(rng, rows * k);
  TypedData w(DType::BF16, random_floats(rng, n * k));
  for (DType bias_dtype : {DType::F32, DType::F16, DType::BF16}) {
    TypedData bias(bias_dtype, random_floats(rng, n, -4.0f, 4.0f));
    std::vector<float> y(rows * n, NAN);
    cpu->matmul(view(x, {rows, k}), w.tensor({n, k}), bias.tensor({n}), view(y, {rows, n}));
    expect_matmul_close(x, w.values, &bias.values, y, rows, n, k, std::string("bias ") + std::string(dtype_name(bias_dtype)));
  }
}

// More rows than one row block (blocks are sized so x stays in L2: 32 rows at k = 4096), and a 3-D x.
TEST_P(MatmulTest, ManyRowsAcrossRowBlocks) {
  auto cpu = backend(3);
  std::mt19937 rng(3);
  const int64_t rows = 75, k = 4096, n = 21;
  std::vector<float> x = random_floats(rng, rows * k);
  TypedData w(DType::F16, random_floats(rng, n * k));
  std::vector<float> y(rows * n, NAN);
  cpu->matmul(view(x, {rows / 5, 5, k}), w.tensor({n, k}), Tensor(), view(y, {rows, n}));
  expect_matmul_close(x, w.values, nullptr, y, rows, n, k, "75 rows");
}

// Each SIMD kernel against the scalar backend: both are within the bound above of the exact result, so
// they are within twice the bound of each other; this catches a kernel and a reference that agree with
// the double reference for the wrong reason (e.g. both reading the same wrong element) only if they
// differ, so it complements the test above rather than replacing it.
TEST_P(MatmulTest, AgreesWithScalarBackend) {
  if (GetParam() == CpuIsa::Scalar) GTEST_SKIP() << "compares SIMD kernels with the scalar one";
  auto cpu = backend();
  CpuBackend scalar(1, CpuIsa::Scalar);
  std::mt19937 rng(4);
  const int64_t rows = 19, k = 1000, n = 37;
  std::vector<float> x = random_floats(rng, rows * k);
  TypedData w(DType::BF16, random_floats(rng, n * k));
  std::vector<float> y(rows * n), y_scalar(rows * n);
  cpu->matmul(view(x, {rows, k}), w.tensor({n, k}), Tensor(), view(y, {rows, n}));
  scalar.matmul(view(x, {rows, k}), w.tensor({n, k}), Tensor(), view(y_scalar, {rows, n}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double magnitude = 0.0;
      for (int64_t i = 0; i < k; ++i) magnitude += std::fabs(static_cast<double>(x[r * k + i]) * w.values[j * k + i]);
      ASSERT_LE(std::fabs(y[r * n + j] - y_scalar[r * n + j]), 2.0 * (k + 1) * kF32Unit * magnitude);
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, MatmulTest, testing::ValuesIn(all_isas()), isa_param_name);

}  // namespace
}  // namespace helium::test
