// tests/backend/cuda/matmul_test.cpp — the CUDA matmul (src/backend/cuda/matmul.cu) against a
// double-precision host reference over odd shapes, for BF16/F16/F32 weights, on both paths (decode:
// rows <= kMaxDecodeRows; prefill: cuBLASLt), and bitwise batch invariance of the decode path for every
// candidate configuration. Every test skips on a machine without a CUDA device.
//
// Three kinds of check, each able to fail:
// - exact: small-integer x and w make every product and partial sum an integer below 2^24, so any
//   summation order is exact and y must equal the reference exactly; a wrong, missing or doubled term
//   shows at once, whatever k is.
// - bounded: real-valued random data against the rounding-error bound of the path (stated per path
//   below) elementwise, and against a normwise figure that catches a lost precision (e.g. x rounded to
//   BF16 on the decode path) that the worst-case bound would let through.
// - bitwise: row i of an R-row call has the bits of row i computed alone (memcmp), R = 1..64.
// Outputs are poisoned with NaN bits before every call, and NaN never passes a check.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/switches.h"
#include "backend/cuda/tune.h"
#include "core/dtype.h"

namespace helium::test {
namespace {

using cuda::MatmulDecodeConfig;

constexpr double kF32Unit = 1.0 / (1 << 24);  // unit roundoff of f32 (round to nearest)

// Infrastructure failures (allocation, copies) are not what is under test: stop with the call named.
#define TEST_CUDA(expr)                                                                               \
  do {                                                                                                \
    cudaError_t err_ = (expr);                                                                        \
    if (err_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (0)

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

class DeviceArray {
 public:
  explicit DeviceArray(size_t bytes) : bytes_(bytes) { TEST_CUDA(cudaMalloc(&data_, std::max<size_t>(bytes, 256))); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* get() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  // cudaMemcpy from pageable memory may return before the copy has landed, and the kernels run on a
  // non-blocking stream that does not wait for it: the device is synchronised before anything reads it.
  void upload(const void* host, size_t bytes, size_t offset = 0) {
    TEST_CUDA(cudaMemcpy(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice));
    TEST_CUDA(cudaDeviceSynchronize());
  }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// What the launchers need, made the way CudaBackend makes it.
class GpuContext {
 public:
  GpuContext(int max_rows, int64_t max_k)
      : workspace_(size_t{32} << 20), scratch_(std::max<size_t>(cuda::matmul_scratch_bytes(max_rows, max_k), 256)) {
    TEST_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
    if (cublasLtCreate(&ctx.lt) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "cublasLtCreate failed\n");
      std::abort();
    }
    cudaDeviceProp prop{};
    TEST_CUDA(cudaGetDeviceProperties(&prop, 0));
    ctx.sm_count = prop.multiProcessorCount;
    ctx.lt_workspace = workspace_.get();
    ctx.lt_workspace_bytes = workspace_.bytes();
    ctx.matmul_scratch = scratch_.get();
    ctx.matmul_scratch_bytes = scratch_.bytes();
    ctx.max_rows = max_rows;
    // The matmul's switches as CudaBackend reads them, so that tools/gpu/check.sh runs every test here on
    // the x-shared kernel too (HELIUM_CUDA_MMA_XSHARED=auto).
    if (const Status s = cuda::read_matmul_switches(ctx); !s.is_ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      std::abort();
    }
  }
  ~GpuContext() {
    cublasLtDestroy(ctx.lt);
    cudaStreamDestroy(ctx.stream);
  }
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;
  void sync() const { TEST_CUDA(cudaStreamSynchronize(ctx.stream)); }

  cuda::Context ctx;

 private:
  DeviceArray workspace_, scratch_;
};

// Weights as stored (bytes in `dtype`) and as the kernels see them (exactly widened f32 values).
struct HostWeights {
  DType dtype;
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};

HostWeights make_weights(DType dtype, const std::vector<float>& v) {
  HostWeights w{dtype, std::vector<float>(v.size()), std::vector<uint8_t>(v.size() * dtype_bytes(dtype))};
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::BF16) {
      const uint16_t h = f32_to_bf16(v[i]);
      std::memcpy(&w.bytes[2 * i], &h, 2);
      w.values[i] = bf16_to_f32(h);
    } else if (dtype == DType::F16) {
      const uint16_t h = f32_to_f16(v[i]);
      std::memcpy(&w.bytes[2 * i], &h, 2);
      w.values[i] = f16_to_f32(h);
    } else {
      std::memcpy(&w.bytes[4 * i], &v[i], 4);
      w.values[i] = v[i];
    }
  }
  return w;
}

std::vector<float> random_reals(std::mt19937& rng, size_t count, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(count);
  for (float& f : v) f = d(rng);
  return v;
}

std::vector<float> random_integers(std::mt19937& rng, size_t count, int max_abs) {
  std::uniform_int_distribution<int> d(-max_abs, max_abs);
  std::vector<float> v(count);
  for (float& f : v) f = static_cast<float>(d(rng));
  return v;
}

struct Reference {
  double exact;      // Σ x_i w_i + bias, in double
  double magnitude;  // Σ |x_i w_i| + |bias|
};

// A problem on the device: x (max_rows, k) F32, w (n, k), optional bias (n), y (max_rows, n) F32.
struct Problem {
  int64_t max_rows, n, k;
  std::vector<float> x;
  HostWeights w;
  bool has_bias = false;
  HostWeights bias;
  DeviceArray dx, dw, dbias, dy;

  Problem(int64_t max_rows_, int64_t n_, int64_t k_, std::vector<float> x_, HostWeights w_, const HostWeights* bias_)
      : max_rows(max_rows_),
        n(n_),
        k(k_),
        x(std::move(x_)),
        w(std::move(w_)),
        has_bias(bias_ != nullptr),
        bias(bias_ ? *bias_ : HostWeights{DType::F32, {}, {}}),
        dx(x.size() * 4),
        dw(w.bytes.size()),
        dbias(bias.bytes.size()),
        dy(static_cast<size_t>(max_rows_ * n_) * 4) {
    dx.upload(x.data(), x.size() * 4);
    dw.upload(w.bytes.data(), w.bytes.size());
    if (has_bias) dbias.upload(bias.bytes.data(), bias.bytes.size());
  }

  Tensor x_rows(int64_t row0, int64_t rows) const { return Tensor(dx.as<float>() + row0 * k, DType::F32, {rows, k}); }
  Tensor w_tensor() const { return Tensor(dw.get(), w.dtype, {n, k}); }
  Tensor bias_tensor() const { return has_bias ? Tensor(dbias.get(), bias.dtype, {n}) : Tensor(); }
  Tensor y_rows(int64_t row0, int64_t rows) const { return Tensor(dy.as<float>() + row0 * n, DType::F32, {rows, n}); }

  void poison_y(const GpuContext& g) const { TEST_CUDA(cudaMemsetAsync(dy.get(), 0xff, dy.bytes(), g.ctx.stream)); }
  std::vector<float> download_y(const GpuContext& g, int64_t rows) const {
    g.sync();
    std::vector<float> y(static_cast<size_t>(rows * n));
    TEST_CUDA(cudaMemcpy(y.data(), dy.get(), y.size() * 4, cudaMemcpyDeviceToHost));
    return y;
  }
  // y = x[0, rows) · wᵀ (+ bias) through the op entry, downloaded.
  std::vector<float> run(const GpuContext& g, int64_t rows) const {
    poison_y(g);
    cuda::matmul(g.ctx, x_rows(0, rows), w_tensor(), bias_tensor(), y_rows(0, rows));
    TEST_CUDA(cudaGetLastError());
    return download_y(g, rows);
  }
  std::vector<float> run_decode(const GpuContext& g, int64_t rows, const MatmulDecodeConfig& cfg) const {
    poison_y(g);
    cuda::matmul_decode(g.ctx, x_rows(0, rows), w_tensor(), bias_tensor(), y_rows(0, rows), cfg);
    TEST_CUDA(cudaGetLastError());
    return download_y(g, rows);
  }
  std::string path(const GpuContext& g, int64_t rows) const {
    return cuda::matmul_path(g.ctx, x_rows(0, rows), w_tensor(), bias_tensor(), y_rows(0, rows));
  }

  // The reference of one row (every feature), computed once per problem.
  const std::vector<Reference>& reference_row(int64_t row) const {
    auto it = references_.find(row);
    if (it != references_.end()) return it->second;
    std::vector<Reference> refs(static_cast<size_t>(n));
    const float* xr = &x[static_cast<size_t>(row * k)];
    for (int64_t j = 0; j < n; ++j) {
      const float* wr = &w.values[static_cast<size_t>(j * k)];
      double exact = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        const double t = static_cast<double>(xr[i]) * wr[i];
        exact += t;
        magnitude += std::fabs(t);
      }
      if (has_bias) {
        exact += bias.values[static_cast<size_t>(j)];
        magnitude += std::fabs(bias.values[static_cast<size_t>(j)]);
      }
      refs[static_cast<size_t>(j)] = {exact, magnitude};
    }
    return references_.emplace(row, std::move(refs)).first->second;
  }

 private:
  mutable std::map<int64_t, std::vector<Reference>> references_;
};

// Longest chain of f32 roundings behind one decode output: 8 fmas per round of chunks in the
// slowest slice (at least 32 slices), 5 butterfly adds, 2 k-warp adds, 1 bias add.
int64_t decode_rounding_depth(int64_t k) { return 8 * ((k + 8 * 32 - 1) / (8 * 32)) + 8; }

// Error model of a path: |y - exact| <= (x_unit + depth · acc_unit) · magnitude elementwise (a worst-case
// bound, first order, with 1% slack), and ||y - exact|| / ||exact|| <= normwise.
struct Tolerance {
  double x_unit;    // relative rounding of x before the products (0: f32 x)
  double acc_unit;  // per rounding of the accumulation
  int64_t depth;
  double normwise;
};

// Decode path: f32 x, f32 fma chains of decode_rounding_depth. The normwise figure: about 5e-7 is expected
// at k = 12288 for random signs (u·sqrt of the chain, over sqrt(k) of the sum); a BF16-rounded x would
// give 1e-3.
Tolerance decode_tolerance(int64_t k) { return {0.0, kF32Unit, decode_rounding_depth(k), 8e-6}; }

// Tensor-core decode path (BF16 w): x split into two BF16 parts, hi + lo within 2^-18 |x| of x (margin:
// 2^-16); products exact, the MMA's f32 accumulation in an unknown order (any-order depth, 2^-23 per
// rounding as for the prefill path). Normwise about 2^-18 / sqrt(3) = 2.2e-6 is expected.
Tolerance mma_tolerance(int64_t k) { return {1.0 / 65536, 2.0 * kF32Unit, k + 2, 1e-5}; }

// The tolerance of the path matmul_path() names.
Tolerance path_tolerance(const std::string& path, DType w_dtype, int64_t k);

// Prefill path: x rounded to BF16 (unit 2^-8) or F16 (2^-11) for 16-bit w, none for F32 w; the tensor
// cores' or cuBLAS's f32 accumulation order is unknown, so the bound takes the any-order depth k + 2 with
// a unit of 2^-23 (tensor cores may truncate instead of rounding). Normwise: random rounding of x gives
// about unit/sqrt(3) (1.1e-3 for BF16, 1.4e-4 for F16); the figures leave a margin of 3.5.
Tolerance prefill_tolerance(DType w_dtype, int64_t k) {
  switch (w_dtype) {
    case DType::BF16: return {1.0 / 256, 2.0 * kF32Unit, k + 2, 4e-3};
    case DType::F16: return {1.0 / 2048, 2.0 * kF32Unit, k + 2, 5e-4};
    default: return {0.0, 2.0 * kF32Unit, k + 2, 8e-6};
  }
}

Tolerance path_tolerance(const std::string& path, DType w_dtype, int64_t k) {
  if (path == "cublaslt") return prefill_tolerance(w_dtype, k);
  return path == "decode-mma" ? mma_tolerance(k) : decode_tolerance(k);
}

std::string describe(const Problem& p, int64_t rows, const std::string& path) {
  std::ostringstream s;
  s << dtype_name(p.w.dtype) << " w (n " << p.n << ", k " << p.k << "), rows " << rows << ", path " << path
    << (p.has_bias ? std::string(", bias ") + std::string(dtype_name(p.bias.dtype)) : std::string());
  return s.str();
}

// Checks rows `check_rows` (those < rows) of y against the reference with tolerance `t` (exact when null).
::testing::AssertionResult check_against_reference(const Problem& p, int64_t rows, const std::vector<float>& y,
                                                   const std::vector<int64_t>& check_rows, const Tolerance* t,
                                                   const std::string& what) {
  double err2 = 0.0, ref2 = 0.0;
  int64_t compared = 0;
  for (int64_t r : check_rows) {
    if (r >= rows) continue;
    const std::vector<Reference>& refs = p.reference_row(r);
    for (int64_t j = 0; j < p.n; ++j) {
      const Reference& ref = refs[static_cast<size_t>(j)];
      const float got = y[static_cast<size_t>(r * p.n + j)];
      const double err = std::fabs(static_cast<double>(got) - ref.exact);
      const double bound = t ? (t->x_unit + static_cast<double>(t->depth) * t->acc_unit) * ref.magnitude * 1.01 : 0.0;
      if (!(err <= bound)) {  // NaN fails
        return ::testing::AssertionFailure()
               << what << ": row " << r << " feature " << j << ": got " << got << ", exact " << ref.exact
               << ", error " << err << " > bound " << bound << " (sum |x w| " << ref.magnitude << ")";
      }
      err2 += err * err;
      ref2 += ref.exact * ref.exact;
      ++compared;
    }
  }
  // The normwise figure is a statistic: only over enough outputs that it cannot fail by chance.
  if (t != nullptr && ref2 > 0.0 && compared >= 256) {
    const double normwise = std::sqrt(err2 / ref2);
    if (!(normwise <= t->normwise))
      return ::testing::AssertionFailure() << what << ": normwise relative error " << normwise << " > " << t->normwise;
  }
  return ::testing::AssertionSuccess();
}

bool same_bits(const float* a, const float* b, int64_t count, int64_t* first_diff) {
  for (int64_t i = 0; i < count; ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      *first_diff = i;
      return false;
    }
  return true;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::string config_string(const MatmulDecodeConfig& c) {
  std::ostringstream s;
  s << "{features_per_lane " << c.features_per_lane << ", rounds_in_flight " << c.rounds_in_flight
    << ", feature_warps " << c.feature_warps << ", k_warps " << c.k_warps << ", mma_stages " << c.mma_stages << "}";
  return s.str();
}

class CudaMatmulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// Row counts of one problem: the decode range's edges (row tiles 1, 2, 4, 8 and several row groups) and
// a few rows past it (prefill when k % 8 == 0, else the decode kernel).
const std::vector<int64_t> kRowCounts = {1, 2, 3, 4, 5, 8, 9, 16, 33, 64, 65, 67};
// Rows whose outputs are compared with the reference (all of them would cost minutes at n = 4096,
// k = 12288; the bitwise test below ties every other row of the decode path to these).
const std::vector<int64_t> kCheckedRows = {0, 1, 2, 4, 7, 8, 32, 63, 64, 66};

TEST_F(CudaMatmulTest, MatchesDoubleReferenceOverOddShapes) {
  GpuContext g(67, 12288);
  std::mt19937 rng(11);
  const int64_t max_rows = 67;
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    for (int64_t k : {1, 7, 64, 100, 4096, 12288}) {
      for (int64_t n : {1, 3, 129, 4096}) {
        Problem p(max_rows, n, k, random_reals(rng, static_cast<size_t>(max_rows * k)),
                  make_weights(dtype, random_reals(rng, static_cast<size_t>(n * k))), nullptr);
        for (int64_t rows : kRowCounts) {
          const std::string path = p.path(g, rows);
          const Tolerance t = path_tolerance(path, dtype, k);
          const std::vector<float> y = p.run(g, rows);
          ASSERT_TRUE(check_against_reference(p, rows, y, kCheckedRows, &t, describe(p, rows, path)));
        }
      }
    }
  }
}

// Every product and partial sum is an integer of at most 12288 · 16 < 2^24: exact in any order.
TEST_F(CudaMatmulTest, ExactOnIntegersDecode) {
  GpuContext g(64, 12288);
  std::mt19937 rng(12);
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    for (int64_t k : {7, 100, 4096, 4104, 12288}) {
      for (int64_t n : {3, 129, 1000}) {
        Problem p(64, n, k, random_integers(rng, static_cast<size_t>(64 * k), 4),
                  make_weights(dtype, random_integers(rng, static_cast<size_t>(n * k), 4)), nullptr);
        for (int64_t rows : {1, 3, 8, 64}) {
          const std::vector<float> y = p.run(g, rows);
          ASSERT_TRUE(check_against_reference(p, rows, y, {0, 1, 2, 5, 63}, nullptr, describe(p, rows, p.path(g, rows))));
        }
      }
    }
  }
}

// The same through cuBLASLt, which must be the path taken for these aligned shapes. Values in [-2, 2]
// keep sums below 2^14, exact even with a narrow accumulator inside the tensor cores.
TEST_F(CudaMatmulTest, ExactOnIntegersPrefill) {
  GpuContext g(300, 4096);
  std::mt19937 rng(13);
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    for (int64_t k : {64, 4096}) {
      for (int64_t n : {64, 1000, 4096}) {
        Problem p(300, n, k, random_integers(rng, static_cast<size_t>(300 * k), 2),
                  make_weights(dtype, random_integers(rng, static_cast<size_t>(n * k), 2)), nullptr);
        for (int64_t rows : {65, 300}) {
          const std::string path = p.path(g, rows);
          if (n % 8 == 0) {
            ASSERT_EQ(path, "cublaslt") << describe(p, rows, path);
          }
          const std::vector<float> y = p.run(g, rows);
          ASSERT_TRUE(check_against_reference(p, rows, y, {0, 1, 64, rows - 1}, nullptr, describe(p, rows, path)));
        }
      }
    }
  }
}

TEST_F(CudaMatmulTest, BiasInEveryDtypeOnBothPaths) {
  GpuContext g(200, 4096);
  std::mt19937 rng(14);
  for (DType w_dtype : {DType::BF16, DType::F32}) {
    for (DType bias_dtype : {DType::F32, DType::F16, DType::BF16}) {
      for (int64_t k : {100, 4096}) {
        const int64_t n = 129;
        const HostWeights bias = make_weights(bias_dtype, random_reals(rng, static_cast<size_t>(n), -4.0f, 4.0f));
        Problem p(200, n, k, random_reals(rng, static_cast<size_t>(200 * k)),
                  make_weights(w_dtype, random_reals(rng, static_cast<size_t>(n * k))), &bias);
        for (int64_t rows : {1, 7, 64, 200}) {
          const std::string path = p.path(g, rows);
          const Tolerance t = path_tolerance(path, w_dtype, k);
          const std::vector<float> y = p.run(g, rows);
          ASSERT_TRUE(check_against_reference(p, rows, y, {0, 6, 63, 199}, &t, describe(p, rows, path)));
        }
      }
    }
  }
}

// Invariant 2: row i of every R-row call (R = 1..64) has the bits of row i computed alone.
::testing::AssertionResult check_batch_invariance(const GpuContext& g, const Problem& p,
                                                  const MatmulDecodeConfig* cfg, const std::vector<int64_t>& row_counts,
                                                  const std::string& what) {
  const int64_t rows_max = 64;
  std::vector<float> alone(static_cast<size_t>(rows_max * p.n));
  for (int64_t i = 0; i < rows_max; ++i) {
    p.poison_y(g);
    if (cfg)
      cuda::matmul_decode(g.ctx, p.x_rows(i, 1), p.w_tensor(), p.bias_tensor(), p.y_rows(0, 1), *cfg);
    else
      cuda::matmul(g.ctx, p.x_rows(i, 1), p.w_tensor(), p.bias_tensor(), p.y_rows(0, 1));
    const std::vector<float> y = p.download_y(g, 1);
    for (int64_t j = 0; j < p.n; ++j)
      if (!std::isfinite(y[static_cast<size_t>(j)]))
        return ::testing::AssertionFailure() << what << ": row " << i << " alone: feature " << j << " is " << y[j];
    std::copy(y.begin(), y.end(), alone.begin() + i * p.n);
  }
  for (int64_t rows : row_counts) {
    const std::vector<float> y = cfg ? p.run_decode(g, rows, *cfg) : p.run(g, rows);
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = 0;
      if (!same_bits(&y[static_cast<size_t>(i * p.n)], &alone[static_cast<size_t>(i * p.n)], p.n, &j)) {
        const float a = y[static_cast<size_t>(i * p.n + j)], b = alone[static_cast<size_t>(i * p.n + j)];
        char bits[64];
        std::snprintf(bits, sizeof bits, "0x%08x vs 0x%08x", bits_of(a), bits_of(b));
        return ::testing::AssertionFailure()
               << what << ": in a " << rows << "-row call, row " << i << " feature " << j << " is " << a
               << " but alone it is " << b << " (" << bits << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<int64_t> all_decode_row_counts() {
  std::vector<int64_t> r;
  for (int64_t i = 1; i <= kMaxDecodeRows; ++i) r.push_back(i);
  return r;
}

TEST_F(CudaMatmulTest, DecodeRowsAreBitwiseBatchInvariant) {
  struct Shape {
    int64_t n, k;
    DType dtype;
    bool bias;
  };
  // The default configuration's k_warps is 1 for n >= 4096, 2 for n >= 2048, 4 below (matmul.cu), so
  // these cover every reduction tree, several x tiles (k = 12288 at 8 rows), partial rounds (k = 4104),
  // partial feature blocks (n = 1000, 129) and the unaligned kernel (k = 7, 100 with F16).
  const std::vector<Shape> shapes = {
      {4096, 4096, DType::BF16, false}, {1024, 4096, DType::BF16, true}, {2048, 4104, DType::F16, false},
      {1000, 12288, DType::BF16, false}, {129, 4096, DType::F32, true}, {129, 100, DType::F16, false},
      {3, 7, DType::BF16, true},       {32000, 4096, DType::BF16, false},
  };
  GpuContext g(64, 12288);
  std::mt19937 rng(15);
  for (const Shape& s : shapes) {
    const HostWeights bias = make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(s.n)));
    Problem p(64, s.n, s.k, random_reals(rng, static_cast<size_t>(64 * s.k)),
              make_weights(s.dtype, random_reals(rng, static_cast<size_t>(s.n * s.k))), s.bias ? &bias : nullptr);
    ASSERT_TRUE(check_batch_invariance(g, p, nullptr, all_decode_row_counts(), describe(p, 64, p.path(g, 64))));
    // The multi-row spread (Context::mma_spread_rows) changes residency only: every row the same bits.
    const std::vector<float> packed = p.run(g, 8);
    g.ctx.mma_spread_rows = true;
    const std::vector<float> spread = p.run(g, 8);
    ASSERT_TRUE(check_batch_invariance(g, p, nullptr, all_decode_row_counts(), describe(p, 64, p.path(g, 64)) + ", spread"));
    g.ctx.mma_spread_rows = false;
    int64_t j = 0;
    EXPECT_TRUE(same_bits(spread.data(), packed.data(), 8 * s.n, &j)) << describe(p, 8, p.path(g, 8)) << ": element " << j;
  }
  // 4096 x 4096 at 8 rows (256 items on the row group of 8, three blocks a multiprocessor) spreads to two.
  if (g.ctx.sm_count >= 128) {
    EXPECT_GT(g.ctx.mma_spread_rows_launches, 0);
  }
}

// matmul_add of rows [0, rows) of p into a copy of `residual` (rows × n), downloaded.
std::vector<float> run_matmul_add(const GpuContext& g, const Problem& p, int64_t rows, const std::vector<float>& residual) {
  const int64_t n = p.n;
  DeviceArray y(static_cast<size_t>(rows * n) * 4), scratch(static_cast<size_t>(rows * n) * 4);
  y.upload(residual.data(), static_cast<size_t>(rows * n) * 4);
  cuda::matmul_add(g.ctx, p.x_rows(0, rows), p.w_tensor(), p.bias_tensor(), Tensor(scratch.get(), DType::F32, {rows, n}),
                   Tensor(y.get(), DType::F32, {rows, n}));
  TEST_CUDA(cudaGetLastError());
  g.sync();
  std::vector<float> got(static_cast<size_t>(rows * n));
  TEST_CUDA(cudaMemcpy(got.data(), y.get(), got.size() * 4, cudaMemcpyDeviceToHost));
  return got;
}

// The x-shared kernel (Context::mma_x_shared: a block's warps take 16-feature tiles of one row group and
// share one copy of x a stage) gives every row of 5-64-row calls the bits of the default kernel — so of the
// row alone — at each tile count a block may take and with auto's choice: partial feature blocks (n = 1000:
// 63 tiles, not a multiple of 2 or 4), a k that ends inside a step (4104) and inside a round of four
// steps (4160), a long k (12288), bias; exact on integers; every ring depth; matmul_add through its store.
TEST_F(CudaMatmulTest, XSharedKernelHasTheDefaultKernelsBits) {
  GpuContext g(64, 12288);
  g.ctx.mma_x_shared = 0;
  std::mt19937 rng(41);
  struct Shape {
    int64_t n, k;
    bool bias;
  };
  const std::vector<int64_t> rows_to_check = {5, 8, 9, 16, 17, 31, 32, 33, 64};
  for (const Shape& s : {Shape{1000, 4104, true}, Shape{4096, 4096, false}, Shape{129, 4160, false},
                         Shape{1024, 12288, true}}) {
    const HostWeights bias = make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(s.n)));
    Problem p(64, s.n, s.k, random_reals(rng, static_cast<size_t>(64 * s.k)),
              make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(s.n * s.k))), s.bias ? &bias : nullptr);
    Problem exact(64, s.n, s.k, random_integers(rng, static_cast<size_t>(64 * s.k), 4),
                  make_weights(DType::BF16, random_integers(rng, static_cast<size_t>(s.n * s.k), 4)), nullptr);
    g.ctx.mma_x_shared = 0;
    std::map<int64_t, std::vector<float>> expected;
    for (int64_t rows : rows_to_check) expected[rows] = p.run(g, rows);
    for (const auto& [warps, groups] : std::vector<std::pair<int, int>>{{cuda::Context::kXSharedWide, 0},
                                                                         {-1, 1},
                                                                         {1, 1},
                                                                         {2, 1},
                                                                         {4, 1},
                                                                         {-1, 0},
                                                                         {1, 2},
                                                                         {2, 2},
                                                                         {4, 2},
                                                                         {1, 4},
                                                                         {2, 4},
                                                                         {4, 4}}) {
      g.ctx.mma_x_shared = warps;
      g.ctx.mma_x_shared_groups = groups;
      const int64_t launches = g.ctx.mma_x_shared_launches, grouped = g.ctx.mma_x_shared_grouped_launches;
      const std::string what = describe(p, 64, "x-shared, " + std::to_string(warps) + " tiles and " +
                                                   std::to_string(groups) + " row groups a block");
      for (int64_t rows : rows_to_check) {
        const std::vector<float> y = p.run(g, rows);
        int64_t j = 0;
        ASSERT_TRUE(same_bits(y.data(), expected[rows].data(), rows * s.n, &j))
            << what << ", " << rows << " rows: element " << j << " is " << y[static_cast<size_t>(j)]
            << ", the default kernel's " << expected[rows][static_cast<size_t>(j)];
        const std::vector<float> e = exact.run(g, rows);
        ASSERT_TRUE(check_against_reference(exact, rows, e, {0, 4, rows - 1}, nullptr, what + " on integers"));
      }
      // wide takes three or four row groups of 16 (33 rows and more), auto row groups of 16 (9 rows and
      // more), a set tile count row groups of 8 too
      const int64_t least = warps == cuda::Context::kXSharedWide ? 33 : warps < 0 ? 9 : 5;
      const int64_t taken = std::count_if(rows_to_check.begin(), rows_to_check.end(), [&](int64_t r) { return r >= least; });
      EXPECT_EQ(g.ctx.mma_x_shared_launches - launches, 2 * taken) << what;
      // two or more row groups of 16 (17 rows and more) on the kernel take G > 1 when it is set or auto
      const int64_t multi = std::count_if(rows_to_check.begin(), rows_to_check.end(),
                                          [&](int64_t r) { return r > 16 && r >= least; });
      EXPECT_EQ(g.ctx.mma_x_shared_grouped_launches - grouped, groups == 1 ? 0 : 2 * multi) << what;
      ASSERT_TRUE(check_batch_invariance(g, p, nullptr, rows_to_check, what));
    }
    g.ctx.mma_x_shared_groups = cuda::Context{}.mma_x_shared_groups;
  }
  // Every ring depth (the launch picks one by the items; here each is set), on a shape whose k ends inside a
  // step and whose tiles do not fill the last block.
  {
    const int64_t n = 1000, k = 4104;
    Problem p(64, n, k, random_reals(rng, static_cast<size_t>(64 * k)),
              make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n * k))), nullptr);
    g.ctx.mma_x_shared = 0;
    const std::vector<float> expected8 = p.run(g, 8), expected64 = p.run(g, 64);
    for (int groups : {1, 4})
      for (int warps : {1, 4})
        for (int stages : {4, 8, 12, 16}) {
          g.ctx.mma_x_shared = warps;
          g.ctx.mma_x_shared_groups = groups;
          g.ctx.mma_x_shared_stages = stages;  // G > 1 has 4 and 8 (12 and 16 take 8)
          int64_t j = 0;
          const std::vector<float> y8 = p.run(g, 8), y64 = p.run(g, 64);
          const std::string what = std::to_string(warps) + " tiles, " + std::to_string(groups) + " row groups, " +
                                   std::to_string(stages) + " stages, ";
          EXPECT_TRUE(same_bits(y8.data(), expected8.data(), 8 * n, &j)) << what << "8 rows: element " << j;
          EXPECT_TRUE(same_bits(y64.data(), expected64.data(), 64 * n, &j)) << what << "64 rows: element " << j;
        }
    g.ctx.mma_x_shared_stages = 0;
    g.ctx.mma_x_shared_groups = cuda::Context{}.mma_x_shared_groups;
  }
  // Through the store's residual add (64 rows, four tiles a block; one and four row groups).
  const int64_t n = 1000, k = 4096, rows = 64;
  Problem p(rows, n, k, random_reals(rng, static_cast<size_t>(rows * k)),
            make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n * k))), nullptr);
  const std::vector<float> residual = random_reals(rng, static_cast<size_t>(rows * n), -4.0f, 4.0f);
  for (int warps : {0, 4, -4}) {
    g.ctx.mma_x_shared = warps < 0 ? -warps : warps;
    g.ctx.mma_x_shared_groups = warps < 0 ? 4 : 1;
    const std::vector<float> got = run_matmul_add(g, p, rows, residual);
    const std::vector<float> product = p.run(g, rows);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(bits_of(got[i]), bits_of(residual[i] + product[i])) << "element " << i << ", x-shared " << warps;
  }
  g.ctx.mma_x_shared = cuda::Context{}.mma_x_shared;
  g.ctx.mma_x_shared_groups = cuda::Context{}.mma_x_shared_groups;
}

// Under the default rule (Context::kXSharedTuned) a shape's launches take the x-shared kernel from the row
// groups of 16 its tuned entry names (MatmulDecodeShapeConfig::x_shared_from_groups), from three (the wide
// rule) when it has no entry or an untimed one, never with kXSharedNever; the same bits either way.
TEST_F(CudaMatmulTest, TunedXSharedRowGroupsPickTheKernel) {
  GpuContext g(64, 4104);
  ASSERT_EQ(g.ctx.mma_x_shared, cuda::Context::kXSharedTuned);
  std::mt19937 rng(43);
  const int64_t n = 1000, k = 4104;
  Problem p(64, n, k, random_reals(rng, static_cast<size_t>(64 * k)),
            make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n * k))), nullptr);
  const std::vector<int64_t> rows_to_check = {8, 9, 16, 17, 32, 33, 48, 49, 64};
  g.ctx.mma_x_shared = 0;
  std::map<int64_t, std::vector<float>> expected;
  for (int64_t rows : rows_to_check) expected[rows] = p.run(g, rows);
  g.ctx.mma_x_shared = cuda::Context::kXSharedTuned;
  const MatmulDecodeConfig config = cuda::matmul_decode_default_config(n, k, DType::BF16);
  ASSERT_GT(config.mma_stages, 0);
  cuda::MatmulDecodeTable table;
  for (int from : {-1, 0, 1, 2, 3, 4, cuda::kXSharedNever}) {  // -1: no entry for the shape
    table.entries.clear();
    if (from >= 0) table.entries.push_back({n, k, DType::BF16, config, from});
    g.ctx.matmul_decode_table = &table;
    const int least_groups = from <= 0 ? 3 : from;
    for (int64_t rows : rows_to_check) {
      const int64_t launches = g.ctx.mma_x_shared_launches;
      const std::vector<float> y = p.run(g, rows);
      const bool x_shared = rows > 8 && (rows + 15) / 16 >= least_groups;  // row groups of 16 from 9 rows
      EXPECT_EQ(g.ctx.mma_x_shared_launches - launches, x_shared ? 1 : 0) << "from " << from << ", " << rows << " rows";
      int64_t j = 0;
      ASSERT_TRUE(same_bits(y.data(), expected[rows].data(), rows * n, &j))
          << "from " << from << ", " << rows << " rows: element " << j;
    }
  }
  g.ctx.matmul_decode_table = nullptr;
}

// The one-row instance of the tensor-core kernel (Context::mma_one_row_stages: x's two split rows per
// stage, so more blocks a multiprocessor) gives one row the bits of the four-row instance at every depth
// it has, over full and partial feature blocks and a k that ends inside a warp stage.
TEST_F(CudaMatmulTest, OneRowInstanceHasTheFourRowBits) {
  GpuContext g(1, 12288);
  std::mt19937 rng(33);
  struct Shape {
    int64_t n, k;
    bool bias;
  };
  for (const Shape& s : {Shape{4096, 4096, false}, Shape{1000, 12288, true}, Shape{129, 4104, false}}) {
    const HostWeights bias = make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(s.n)));
    Problem p(1, s.n, s.k, random_reals(rng, static_cast<size_t>(s.k)),
              make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(s.n * s.k))), s.bias ? &bias : nullptr);
    g.ctx.mma_one_row_stages = 0;
    const std::vector<float> four = p.run(g, 1);
    for (int stages : {6, 7, 8, 10, 12, 16}) {  // 10-16: o_proj's deep rings (Context::oproj_stages)
      g.ctx.mma_one_row_stages = stages;
      const std::vector<float> one = p.run(g, 1);
      int64_t j = 0;
      EXPECT_TRUE(same_bits(one.data(), four.data(), s.n, &j))
          << s.n << " x " << s.k << ", " << stages << " stages: feature " << j << " is " << one[static_cast<size_t>(j)]
          << ", the four-row instance's " << four[static_cast<size_t>(j)];
    }
    g.ctx.mma_one_row_stages = 0;
  }
}

// matmul_split over a stacked weight: on the decode path (one launch, rows <= 64) each output has the
// bits of matmul() with the whole stacked weight, cut into its split; on the prefill path (one GEMM per
// split) the bits of matmul() with that split's rows of w. With and without bias, for the stacked
// q/k/v (3 splits) and gate/up (2 splits) layouts.
TEST_F(CudaMatmulTest, SplitOutputsEqualTheStackedMatmul) {
  GpuContext g(96, 4096);
  std::mt19937 rng(21);
  struct Case {
    std::vector<int64_t> widths;
    int64_t k;
    bool bias;
  };
  const std::vector<Case> cases = {{{512, 128, 128}, 1024, false}, {{512, 128, 128}, 1024, true},
                                   {{1000, 1000}, 4096, false},    {{96, 40, 40}, 100, true}};
  for (const Case& cs : cases) {
    int64_t n = 0;
    for (int64_t w : cs.widths) n += w;
    const HostWeights bias = make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n)));
    Problem p(96, n, cs.k, random_reals(rng, static_cast<size_t>(96 * cs.k)),
              make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n * cs.k))), cs.bias ? &bias : nullptr);
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{64}, int64_t{96}}) {
      const std::vector<float> whole = p.run(g, rows);
      std::vector<std::unique_ptr<DeviceArray>> outs;
      std::vector<Tensor> ys;
      for (int64_t w : cs.widths) {
        outs.push_back(std::make_unique<DeviceArray>(static_cast<size_t>(rows * w) * 4));
        TEST_CUDA(cudaMemsetAsync(outs.back()->get(), 0xff, outs.back()->bytes(), g.ctx.stream));
        ys.push_back(Tensor(outs.back()->get(), DType::F32, {rows, w}));
      }
      cuda::matmul_split(g.ctx, p.x_rows(0, rows), p.w_tensor(), p.bias_tensor(), ys);
      TEST_CUDA(cudaGetLastError());
      g.sync();
      int64_t offset = 0;
      for (size_t i = 0; i < cs.widths.size(); ++i) {
        const int64_t w = cs.widths[i];
        std::vector<float> got(static_cast<size_t>(rows * w));
        TEST_CUDA(cudaMemcpy(got.data(), outs[i]->get(), got.size() * 4, cudaMemcpyDeviceToHost));
        std::vector<float> expected = whole;
        int64_t stride = n, column = offset;
        if (rows > kMaxDecodeRows) {  // prefill: the split's own GEMM
          DeviceArray alone(static_cast<size_t>(rows * w) * 4);
          Tensor bias_part;
          if (cs.bias) bias_part = Tensor(static_cast<uint8_t*>(p.dbias.get()) + offset * 2, DType::BF16, {w});
          cuda::matmul(g.ctx, p.x_rows(0, rows), p.w_tensor().rows_from(offset).first_rows(w), bias_part,
                       Tensor(alone.get(), DType::F32, {rows, w}));
          g.sync();
          expected.resize(static_cast<size_t>(rows * w));
          TEST_CUDA(cudaMemcpy(expected.data(), alone.get(), expected.size() * 4, cudaMemcpyDeviceToHost));
          stride = w;
          column = 0;
        }
        for (int64_t r = 0; r < rows; ++r) {
          int64_t diff = -1;
          ASSERT_TRUE(same_bits(&got[static_cast<size_t>(r * w)], &expected[static_cast<size_t>(r * stride + column)], w, &diff))
              << "split " << i << " row " << r << " feature " << diff << " of " << describe(p, rows, p.path(g, rows));
        }
        offset += w;
      }
    }
  }
}

// matmul_add (the residual add in the decode kernel's store) has the bits of matmul() then add(), on
// both paths, with and without bias.
TEST_F(CudaMatmulTest, MatmulAddEqualsMatmulThenAdd) {
  GpuContext g(96, 4096);
  std::mt19937 rng(22);
  for (bool with_bias : {false, true}) {
    const int64_t n = 1000, k = 4096;
    const HostWeights bias = make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n)));
    Problem p(96, n, k, random_reals(rng, static_cast<size_t>(96 * k)),
              make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n * k))), with_bias ? &bias : nullptr);
    const std::vector<float> residual = random_reals(rng, static_cast<size_t>(96 * n), -4.0f, 4.0f);
    for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{64}, int64_t{96}}) {
      const std::vector<float> product = p.run(g, rows);
      const std::vector<float> got = run_matmul_add(g, p, rows, residual);
      for (size_t i = 0; i < got.size(); ++i) {
        const float expected = residual[i] + product[i];  // one f32 rounding, as the add kernel does
        ASSERT_EQ(bits_of(got[i]), bits_of(expected)) << "element " << i << ", " << describe(p, rows, p.path(g, rows));
      }
    }
  }
}

// Every candidate configuration (each kernel instance: weight type × row tile × lane shape, and every
// (feature_warps, k_warps)) is exact on integers and batch-invariant on real data.
TEST_F(CudaMatmulTest, EveryCandidateConfigurationIsExactAndInvariant) {
  GpuContext g(64, 4104);
  std::mt19937 rng(16);
  const std::vector<int64_t> rows_to_check = {1, 2, 3, 4, 5, 8, 9, 17, 64};
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    const int64_t n = 1000, k = 4104;  // a partial feature block and a partial round for every config
    Problem exact(64, n, k, random_integers(rng, static_cast<size_t>(64 * k), 4),
                  make_weights(dtype, random_integers(rng, static_cast<size_t>(n * k), 4)), nullptr);
    Problem real(64, n, k, random_reals(rng, static_cast<size_t>(64 * k)),
                 make_weights(dtype, random_reals(rng, static_cast<size_t>(n * k))), nullptr);
    std::vector<MatmulDecodeConfig> candidates = cuda::matmul_decode_candidates(n, k, dtype);
    ASSERT_GE(candidates.size(), dtype == DType::BF16 ? 3u : 10u);
    ASSERT_EQ(candidates.front(), cuda::matmul_decode_default_config(n, k, dtype));
    if (dtype == DType::BF16) {  // the tensor-core kernel's ring depths, and the FMA kernel's BF16 instances
      ASSERT_GT(candidates.front().mma_stages, 0);
      const std::vector<MatmulDecodeConfig> fma = cuda::matmul_decode_candidates(n, k, DType::F16);
      candidates.insert(candidates.end(), fma.begin(), fma.end());
    }
    for (const MatmulDecodeConfig& cfg : candidates) {
      ASSERT_TRUE(cuda::matmul_decode_config_valid(cfg, dtype));
      const std::string what = std::string(dtype_name(dtype)) + " config " + config_string(cfg);
      for (int64_t rows : rows_to_check) {
        const std::vector<float> y = exact.run_decode(g, rows, cfg);
        ASSERT_TRUE(check_against_reference(exact, rows, y, {0, 1, 2, 7, 8, 63}, nullptr,
                                            what + " rows " + std::to_string(rows)));
      }
      ASSERT_TRUE(check_batch_invariance(g, real, &cfg, rows_to_check, what));
    }
  }
}

// A misaligned view of x (4 bytes off 16) goes to the scalar-load kernel (F16 w), or to the tensor-core
// kernel's 4-byte copies (BF16 w), which must produce the bits of the aligned call: the order is the
// shape's, not the loads'.
TEST_F(CudaMatmulTest, UnalignedOperandsGiveTheSameBits) {
  GpuContext g(64, 4096);
  std::mt19937 rng(17);
  for (DType dtype : {DType::F16, DType::BF16})
  for (int64_t n : {4096, 2048, 1024}) {  // k_warps 1, 2, 4 by default (FMA kernel)
    const int64_t k = 4096, rows = 5;
    Problem p(rows, n, k, random_reals(rng, static_cast<size_t>(rows * k)),
              make_weights(dtype, random_reals(rng, static_cast<size_t>(n * k))), nullptr);
    const std::string path = dtype == DType::BF16 ? "decode-mma" : "decode";
    ASSERT_EQ(p.path(g, rows), path);
    const std::vector<float> aligned = p.run(g, rows);

    DeviceArray shifted(static_cast<size_t>(rows * k + 1) * 4);
    shifted.upload(p.x.data(), p.x.size() * 4, 4);
    const Tensor x_view(shifted.as<float>() + 1, DType::F32, {rows, k});
    ASSERT_STREQ(cuda::matmul_path(g.ctx, x_view, p.w_tensor(), Tensor(), p.y_rows(0, rows)),
                 dtype == DType::BF16 ? "decode-mma" : "decode-unaligned");
    p.poison_y(g);
    cuda::matmul(g.ctx, x_view, p.w_tensor(), Tensor(), p.y_rows(0, rows));
    const std::vector<float> unaligned = p.download_y(g, rows);
    int64_t i = 0;
    ASSERT_TRUE(same_bits(aligned.data(), unaligned.data(), rows * n, &i))
        << "n " << n << ": element " << i << ": vector kernel " << aligned[i] << ", scalar kernel " << unaligned[i];
  }
}

TEST_F(CudaMatmulTest, TunedTableEntryIsUsed) {
  GpuContext g(8, 4096);
  std::mt19937 rng(18);
  const int64_t n = 1024, k = 4096;
  Problem p(8, n, k, random_reals(rng, static_cast<size_t>(8 * k)),
            make_weights(DType::BF16, random_reals(rng, static_cast<size_t>(n * k))), nullptr);
  const MatmulDecodeConfig tuned{4, 2, 2, 1};
  ASSERT_TRUE(cuda::matmul_decode_config_valid(tuned, DType::BF16));
  const std::vector<float> expected = p.run_decode(g, 8, tuned);
  cuda::MatmulDecodeTable table;
  table.entries.push_back({n, k, DType::BF16, tuned});
  g.ctx.matmul_decode_table = &table;
  const std::vector<float> y = p.run(g, 8);
  g.ctx.matmul_decode_table = nullptr;
  int64_t i = 0;
  ASSERT_TRUE(same_bits(expected.data(), y.data(), 8 * n, &i)) << "element " << i;
}

// Host-side facts (no GPU needed).
TEST(CudaMatmulHostTest, ScratchSize) {
  EXPECT_GE(cuda::matmul_scratch_bytes(64, 12288), size_t{64} * 12288 * 4);  // the tensor-core kernel's split x
  EXPECT_GE(cuda::matmul_scratch_bytes(4096, 12288), size_t{4096} * 12288 * 2);
}

TEST(CudaMatmulHostTest, CandidatesAreValidDistinctAndStartWithTheDefault) {
  const int64_t shapes[][2] = {{4096, 4096}, {1024, 4096}, {12288, 4096}, {4096, 12288}, {151936, 4096},
                               {1, 1},       {3, 7},       {129, 100},    {2048, 64}};
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    for (const auto& nk : shapes) {
      const std::vector<MatmulDecodeConfig> c = cuda::matmul_decode_candidates(nk[0], nk[1], dtype);
      ASSERT_FALSE(c.empty());
      EXPECT_EQ(c.front(), cuda::matmul_decode_default_config(nk[0], nk[1], dtype));
      for (size_t i = 0; i < c.size(); ++i) {
        EXPECT_TRUE(cuda::matmul_decode_config_valid(c[i], dtype)) << config_string(c[i]);
        for (size_t j = 0; j < i; ++j) EXPECT_FALSE(c[i] == c[j]) << config_string(c[i]);
      }
    }
  }
  EXPECT_FALSE(cuda::matmul_decode_config_valid(MatmulDecodeConfig{2, 4, 8, 2}, DType::BF16));  // 16 warps
  EXPECT_FALSE(cuda::matmul_decode_config_valid(MatmulDecodeConfig{1, 8, 4, 1}, DType::F32));   // no such instance
  EXPECT_FALSE(cuda::matmul_decode_config_valid(MatmulDecodeConfig{2, 4, 4, 1}, DType::I32));
}

// The tuner's rule (tune.h): within 3% of the fastest, the largest ring up to 64 KB, then the most warps,
// then the fastest; never a ring past 64 KB, however fast.
TEST(CudaMatmulHostTest, TunerTakesTheLargestRingThenTheMostWarps) {
  const MatmulDecodeConfig ring64_8warps{4, 4, 2, 4}, ring64_4warps{4, 8, 2, 2}, ring32_8warps{4, 2, 2, 4},
      ring128{4, 8, 4, 2};
  ASSERT_EQ(cuda::matmul_decode_ring_bytes(ring64_8warps, DType::BF16), 64u * 1024);
  ASSERT_EQ(cuda::matmul_decode_ring_bytes(ring64_4warps, DType::BF16), 64u * 1024);
  ASSERT_EQ(cuda::matmul_decode_ring_bytes(ring32_8warps, DType::BF16), 32u * 1024);
  ASSERT_GT(cuda::matmul_decode_ring_bytes(ring128, DType::BF16), 64u * 1024);
  const MatmulDecodeConfig fallback = cuda::matmul_decode_default_config(24576, 4096, DType::BF16);
  using Timed = std::vector<std::pair<MatmulDecodeConfig, float>>;
  float us = 0;
  // The eighth-session case: the 4-warp 64 KB ring timed 1% faster alone; the 8-warp one is taken.
  EXPECT_EQ(cuda::choose_decode_config(Timed{{ring64_4warps, 49.0f}, {ring64_8warps, 49.5f}, {ring32_8warps, 48.8f}},
                                       DType::BF16, fallback, &us),
            ring64_8warps);
  EXPECT_EQ(us, 49.5f);
  // Outside the tie, the fastest within it wins; a 128 KB ring never does.
  EXPECT_EQ(cuda::choose_decode_config(Timed{{ring64_8warps, 60.0f}, {ring32_8warps, 48.0f}, {ring128, 40.0f}},
                                       DType::BF16, fallback),
            ring32_8warps);
  EXPECT_EQ(cuda::choose_decode_config(Timed{{ring128, 40.0f}}, DType::BF16, fallback, &us), fallback);
  EXPECT_EQ(us, 0.0f);
  EXPECT_EQ(cuda::choose_decode_config(Timed{}, DType::BF16, fallback), fallback);
}

// The x-shared threshold (tune.h): the fewest row groups from which the x-shared kernel won by more than the
// tie fraction at that count and every larger one; a loss at 64 rows (or no timing) means never.
TEST(CudaMatmulHostTest, TunerTakesTheXSharedKernelFromWhereItKeepsWinning) {
  using T = cuda::XSharedTiming;
  using Timed = std::vector<T>;
  // The H100's batched figures turned into times: a loss at 32 rows, wins at 48 and 64 (any order given).
  EXPECT_EQ(cuda::choose_x_shared_from_groups(Timed{T{4, 100.0f, 76.0f}, T{2, 50.0f, 51.0f}, T{3, 75.0f, 64.0f}}), 3);
  EXPECT_EQ(cuda::choose_x_shared_from_groups(Timed{T{2, 50.0f, 40.0f}, T{3, 75.0f, 60.0f}, T{4, 100.0f, 80.0f}}), 2);
  EXPECT_EQ(cuda::choose_x_shared_from_groups(
                Timed{T{1, 30.0f, 20.0f}, T{2, 50.0f, 40.0f}, T{3, 75.0f, 60.0f}, T{4, 100.0f, 80.0f}}),
            1);
  EXPECT_EQ(cuda::choose_x_shared_from_groups(
                Timed{T{1, 30.0f, 50.0f}, T{2, 50.0f, 40.0f}, T{3, 75.0f, 60.0f}, T{4, 100.0f, 80.0f}}),
            2);
  // A win at 32 rows below a loss at 48 does not count: more rows never leave the kernel.
  EXPECT_EQ(cuda::choose_x_shared_from_groups(Timed{T{2, 50.0f, 40.0f}, T{3, 75.0f, 76.0f}, T{4, 100.0f, 80.0f}}), 4);
  // Within 3% is a tie, and a tie keeps the default kernel.
  EXPECT_EQ(cuda::choose_x_shared_from_groups(Timed{T{2, 50.0f, 40.0f}, T{3, 75.0f, 60.0f}, T{4, 100.0f, 98.0f}}),
            cuda::kXSharedNever);
  EXPECT_EQ(cuda::choose_x_shared_from_groups(Timed{T{4, 100.0f, 96.0f}}), 4);
  // A backend of fewer rows times fewer counts; nothing timed is never.
  EXPECT_EQ(cuda::choose_x_shared_from_groups(Timed{T{2, 50.0f, 40.0f}}), 2);
  EXPECT_EQ(cuda::choose_x_shared_from_groups(Timed{}), cuda::kXSharedNever);
}

// The matmul's switches (switches.h), one parser for the backend, these tests and the benchmark: each
// spelling sets its Context field, unset or empty leaves the default, a malformed value is refused by name.
TEST(CudaMatmulHostTest, SwitchesSetTheContextOrAreRefusedByName) {
  const char* names[] = {"HELIUM_CUDA_MMA_ONE_ROW",     "HELIUM_CUDA_OPROJ_STAGES",       "HELIUM_CUDA_MMA_BLOCKS",
                         "HELIUM_CUDA_MMA_SPREAD",      "HELIUM_CUDA_MMA_SPREAD_ROWS",    "HELIUM_CUDA_MMA_XSHARED",
                         "HELIUM_CUDA_MMA_XSHARED_STAGES", "HELIUM_CUDA_MMA_XSHARED_GROUPS"};
  std::map<std::string, std::string> saved;
  for (const char* n : names) {
    if (const char* v = std::getenv(n)) saved[n] = v;
    unsetenv(n);
  }
  const cuda::Context defaults;
  cuda::Context ctx;
  ASSERT_TRUE(cuda::read_matmul_switches(ctx).is_ok());
  EXPECT_EQ(ctx.mma_one_row_stages, defaults.mma_one_row_stages);
  EXPECT_EQ(ctx.oproj_stages, defaults.oproj_stages);
  EXPECT_EQ(ctx.mma_one_row_blocks, defaults.mma_one_row_blocks);
  EXPECT_EQ(ctx.mma_spread, defaults.mma_spread);
  EXPECT_EQ(ctx.mma_spread_rows, defaults.mma_spread_rows);
  EXPECT_EQ(ctx.mma_x_shared, defaults.mma_x_shared);
  EXPECT_EQ(ctx.mma_x_shared_stages, defaults.mma_x_shared_stages);
  EXPECT_EQ(ctx.mma_x_shared_groups, defaults.mma_x_shared_groups);

  const struct {
    const char* name;
    const char* value;
    int cuda::Context::*field;
    int expected;
  } taken[] = {{"HELIUM_CUDA_MMA_ONE_ROW", "0", &cuda::Context::mma_one_row_stages, 0},
               {"HELIUM_CUDA_MMA_ONE_ROW", "8", &cuda::Context::mma_one_row_stages, 8},
               {"HELIUM_CUDA_OPROJ_STAGES", "12", &cuda::Context::oproj_stages, 12},
               {"HELIUM_CUDA_OPROJ_STAGES", "0", &cuda::Context::oproj_stages, 0},
               {"HELIUM_CUDA_MMA_BLOCKS", "2", &cuda::Context::mma_one_row_blocks, 2},
               {"HELIUM_CUDA_MMA_XSHARED", "auto", &cuda::Context::mma_x_shared, -1},
               {"HELIUM_CUDA_MMA_XSHARED", "off", &cuda::Context::mma_x_shared, 0},
               {"HELIUM_CUDA_MMA_XSHARED", "wide", &cuda::Context::mma_x_shared, cuda::Context::kXSharedWide},
               {"HELIUM_CUDA_MMA_XSHARED", "tuned", &cuda::Context::mma_x_shared, cuda::Context::kXSharedTuned},
               {"HELIUM_CUDA_MMA_XSHARED", "4", &cuda::Context::mma_x_shared, 4},
               {"HELIUM_CUDA_MMA_XSHARED_STAGES", "16", &cuda::Context::mma_x_shared_stages, 16},
               {"HELIUM_CUDA_MMA_XSHARED_STAGES", "", &cuda::Context::mma_x_shared_stages, 0},
               {"HELIUM_CUDA_MMA_XSHARED_GROUPS", "auto", &cuda::Context::mma_x_shared_groups, 0},
               {"HELIUM_CUDA_MMA_XSHARED_GROUPS", "4", &cuda::Context::mma_x_shared_groups, 4}};
  for (const auto& t : taken) {
    ASSERT_EQ(setenv(t.name, t.value, 1), 0);
    cuda::Context c;
    c.mma_x_shared = 2;  // so that "off" and "" are told apart from the default
    c.mma_x_shared_groups = 2;  // and "auto"
    c.oproj_stages = 16;        // and "0"
    const Status s = cuda::read_matmul_switches(c);
    EXPECT_TRUE(s.is_ok()) << t.name << "=" << t.value << ": " << s.message();
    EXPECT_EQ(c.*t.field, t.expected) << t.name << "=" << t.value;
    unsetenv(t.name);
  }
  ASSERT_EQ(setenv("HELIUM_CUDA_MMA_SPREAD_ROWS", "off", 1), 0);
  ASSERT_TRUE(cuda::read_matmul_switches(ctx).is_ok());
  EXPECT_FALSE(ctx.mma_spread_rows);
  unsetenv("HELIUM_CUDA_MMA_SPREAD_ROWS");

  const std::pair<const char*, const char*> refused[] = {
      {"HELIUM_CUDA_MMA_ONE_ROW", "5"},        {"HELIUM_CUDA_MMA_ONE_ROW", "6x"},   {"HELIUM_CUDA_OPROJ_STAGES", "8"},
      {"HELIUM_CUDA_OPROJ_STAGES", "deep"},    {"HELIUM_CUDA_MMA_BLOCKS", "0"},
      {"HELIUM_CUDA_MMA_BLOCKS", "two"},       {"HELIUM_CUDA_MMA_SPREAD", "1"},     {"HELIUM_CUDA_MMA_SPREAD_ROWS", "wide"},
      {"HELIUM_CUDA_MMA_XSHARED", "8"},        {"HELIUM_CUDA_MMA_XSHARED", "on"},   {"HELIUM_CUDA_MMA_XSHARED", "2 "},
      {"HELIUM_CUDA_MMA_XSHARED_STAGES", "6"}, {"HELIUM_CUDA_MMA_XSHARED_STAGES", "-4"},
      {"HELIUM_CUDA_MMA_XSHARED_GROUPS", "3"}, {"HELIUM_CUDA_MMA_XSHARED_GROUPS", "0"}};
  for (const auto& [name, value] : refused) {
    ASSERT_EQ(setenv(name, value, 1), 0);
    cuda::Context c;
    const Status s = cuda::read_matmul_switches(c);
    EXPECT_FALSE(s.is_ok()) << name << "=" << value;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::string("'") + value + "'"), std::string::npos) << s.message();
    unsetenv(name);
  }
  for (const auto& [n, v] : saved) setenv(n.c_str(), v.c_str(), 1);
}

// Broken preconditions abort naming the op, before any device work (so no GPU is needed).
// The matmul tuning cache's reader (tune.h): what the tuner writes reads back; any damage is an error that
// names it, so the tuner re-measures instead of trusting part of a file.
TEST(CudaTuneHostTest, MatmulCacheReadsBackOrNamesTheDamage) {
  const MatmulDecodeConfig cfg = cuda::matmul_decode_default_config(4096, 4096, DType::BF16);
  auto entry = [&](int groups) {
    nlohmann::json e = {{"n", 4096}, {"k", 4096}, {"dtype", "BF16"},
                        {"config", {{"features_per_lane", cfg.features_per_lane}, {"rounds_in_flight", cfg.rounds_in_flight},
                                    {"feature_warps", cfg.feature_warps}, {"k_warps", cfg.k_warps},
                                    {"mma_stages", cfg.mma_stages}}},
                        {"us", 10.5}};
    if (groups >= 0) e["x_shared_from_groups"] = groups;
    return e;
  };
  const nlohmann::json good = {{"gpu", "x"}, {"shapes", {entry(3), entry(-1)}}};
  auto read = cuda::read_matmul_tuning(good);
  ASSERT_TRUE(read.is_ok()) << read.error_message();
  ASSERT_EQ(read.value().size(), 2u);
  EXPECT_EQ(read.value()[0].n, 4096);
  EXPECT_EQ(read.value()[0].w_dtype, DType::BF16);
  EXPECT_EQ(read.value()[0].config, cfg);
  EXPECT_EQ(read.value()[0].x_shared_from_groups, 3);
  EXPECT_EQ(read.value()[1].x_shared_from_groups, 0);  // an older cache: not timed
  auto damaged = [&](const std::function<void(nlohmann::json&)>& damage, const std::string& says) {
    nlohmann::json j = good;
    damage(j);
    auto r = cuda::read_matmul_tuning(j);
    ASSERT_FALSE(r.is_ok()) << j.dump();
    EXPECT_NE(r.error_message().find(says), std::string::npos) << r.error_message();
  };
  damaged([](nlohmann::json& j) { j.erase("shapes"); }, "shapes");
  damaged([](nlohmann::json& j) { j["shapes"] = 3; }, "not a list");
  damaged([](nlohmann::json& j) { j["shapes"][1].erase("k"); }, "k");
  damaged([](nlohmann::json& j) { j["shapes"][0]["n"] = "many"; }, "number");
  damaged([](nlohmann::json& j) { j["shapes"][1]["dtype"] = "BF17"; }, "shape 1: unknown dtype");
  damaged([](nlohmann::json& j) { j["shapes"][0]["config"]["feature_warps"] = 8; }, "shape 0: no such configuration");
  damaged([](nlohmann::json& j) { j["shapes"][0]["config"].erase("mma_stages"); }, "mma_stages");
  damaged([](nlohmann::json& j) { j["shapes"][0]["x_shared_from_groups"] = 6; }, "shape 0: x-shared row groups");
  damaged([](nlohmann::json& j) { j["shapes"][1]["x_shared_from_groups"] = -1; }, "shape 1: x-shared row groups");
  damaged([](nlohmann::json& j) { j["shapes"][0]["n"] = 0; }, "shape 0: no such configuration");
}

// The partition tiers from timings (tune.h): the current size kept within the tie, the fastest outside it,
// sizes never shrinking as keys grow, tiers ending at the most keys that chose their size or less.
TEST(CudaTuneHostTest, PartitionTiersFollowTheTimingsPastTheTie) {
  using T = cuda::PartitionTiming;
  const cuda::PartitionTiers current;  // 64 to 2,048 keys, 128 to 4,096, 256 to 16,384, then 512
  auto tiers_of = [](const cuda::PartitionTiers& t) { return std::array<int, 3>{t.small_end, t.medium_end, t.large_end}; };
  // Timings that agree with the current tiers give them back.
  const std::vector<T> agree = {{1024, 64, 9.0f},    {1024, 128, 10.2f},  {1024, 256, 13.0f}, {1024, 512, 20.0f},
                                {2048, 64, 10.0f},   {2048, 128, 10.1f},  {2048, 256, 13.4f}, {2048, 512, 20.0f},
                                {4096, 64, 15.3f},   {4096, 128, 12.7f},  {4096, 256, 13.2f}, {4096, 512, 20.0f},
                                {8192, 128, 19.2f},  {8192, 256, 16.9f},  {8192, 512, 18.0f}, {16384, 256, 30.0f},
                                {16384, 512, 30.5f}, {32768, 512, 43.0f}};
  EXPECT_EQ(tiers_of(cuda::choose_partition_tiers(agree, current)), (std::array<int, 3>{2048, 4096, 16384}));
  // 2K timed 128 more than 3% faster (the seventh session's isolated figures): 128 from 2K on.
  std::vector<T> faster = agree;
  faster[5].us = 9.5f;  // 2048 keys, 128: 5% under 64's 10.0
  EXPECT_EQ(tiers_of(cuda::choose_partition_tiers(faster, current)), (std::array<int, 3>{1024, 4096, 16384}));
  // A smaller size winning at more keys does not shrink the partitions again.
  std::vector<T> shrink = agree;
  shrink[11].us = 12.0f;  // 4K: 512 fastest
  shrink[12].us = 25.0f;  // 8K: 128 fastest by far
  EXPECT_EQ(tiers_of(cuda::choose_partition_tiers(shrink, current)), (std::array<int, 3>{2048, 2048, 2048}));
  // 128 fastest already at the fewest keys timed: no 64-key tier.
  std::vector<T> no_small = {{1024, 64, 12.0f}, {1024, 128, 10.0f}, {3000, 128, 11.0f}, {3000, 256, 12.0f}};
  EXPECT_EQ(tiers_of(cuda::choose_partition_tiers(no_small, current)), (std::array<int, 3>{0, 3000, 3000}));
  // One size timed at a key count (what the scratch allows there) is taken.
  EXPECT_EQ(tiers_of(cuda::choose_partition_tiers(std::vector<T>{{32768, 512, 40.0f}}, current)),
            (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(tiers_of(cuda::choose_partition_tiers(std::vector<T>{}, current)), tiers_of(current));
}

// The attention tuning cache's reader: the tiers back, or an error for tiers out of order or range, a field
// missing, or tiers that would cut a row of the context into more partitions than the scratch holds.
TEST(CudaTuneHostTest, AttentionCacheReadsBackOrNamesTheDamage) {
  const nlohmann::json good = {{"tiers", {{"small_end", 1024}, {"medium_end", 4096}, {"large_end", 16384}}}};
  auto read = cuda::read_attention_tuning(good, 32768, 64);
  ASSERT_TRUE(read.is_ok()) << read.error_message();
  EXPECT_EQ(read.value().tiers.small_end, 1024);
  EXPECT_EQ(read.value().tiers.medium_end, 4096);
  EXPECT_EQ(read.value().tiers.large_end, 16384);
  EXPECT_EQ(read.value().oproj_stages, -1);  // a file without the depth (the tuner then times it)
  for (int stages : {0, 10, 12, 16}) {
    nlohmann::json with = good;
    with["oproj_stages"] = stages;
    auto r = cuda::read_attention_tuning(with, 32768, 64);
    ASSERT_TRUE(r.is_ok()) << r.error_message();
    EXPECT_EQ(r.value().oproj_stages, stages);
  }
  auto refused = [](const nlohmann::json& j, int64_t partitions, const std::string& says) {
    auto r = cuda::read_attention_tuning(j, 32768, partitions);
    ASSERT_FALSE(r.is_ok()) << j.dump();
    EXPECT_NE(r.error_message().find(says), std::string::npos) << r.error_message();
  };
  refused({{"tiers", {{"small_end", 4096}, {"medium_end", 1024}, {"large_end", 16384}}}}, 64, "out of order");
  refused({{"tiers", {{"small_end", -1}, {"medium_end", 1024}, {"large_end", 16384}}}}, 64, "out of order");
  refused({{"tiers", {{"small_end", 1024}, {"large_end", 16384}}}}, 64, "medium_end");
  refused({{"tiers", {{"small_end", "1024"}, {"medium_end", 1024}, {"large_end", 16384}}}}, 64, "number");
  refused(nlohmann::json::object(), 64, "tiers");
  // 64-key partitions to 8K keys: 128 partitions, past a scratch of 64.
  refused({{"tiers", {{"small_end", 8192}, {"medium_end", 8192}, {"large_end", 16384}}}}, 64, "more than 64 partitions");
  // A depth HELIUM_CUDA_OPROJ_STAGES does not take, or not a number.
  nlohmann::json bad_depth = good;
  bad_depth["oproj_stages"] = 8;
  refused(bad_depth, 64, "oproj_stages 8 is not 0, 10, 12 or 16");
  bad_depth["oproj_stages"] = "10";
  refused(bad_depth, 64, "number");
}

// o_proj's depth after attention from the chain's timings (tune.h): the fastest, unless the depth in force
// was timed within kOprojTieFraction of it; nothing timed keeps it.
TEST(CudaTuneHostTest, OprojDepthFollowsTheTimingsPastTheTie) {
  using T = cuda::OprojTiming;
  // The deep ring 1% slower (the H200's sign): the one-row instance's own depth.
  EXPECT_EQ(cuda::choose_oproj_stages(std::vector<T>{{10, 30.3f}, {0, 30.0f}}, 10), 0);
  // 1% faster (the H100's sign): kept.
  EXPECT_EQ(cuda::choose_oproj_stages(std::vector<T>{{10, 29.7f}, {0, 30.0f}}, 10), 10);
  // Within the tie either way: the depth in force.
  EXPECT_EQ(cuda::choose_oproj_stages(std::vector<T>{{10, 30.1f}, {0, 30.0f}}, 10), 10);
  EXPECT_EQ(cuda::choose_oproj_stages(std::vector<T>{{0, 30.1f}, {10, 30.0f}}, 0), 0);
  EXPECT_EQ(cuda::choose_oproj_stages(std::vector<T>{{0, 30.3f}, {10, 30.0f}}, 0), 10);
  EXPECT_EQ(cuda::choose_oproj_stages(std::vector<T>{}, 10), 10);
}

// The tuner end to end on the GPU (a short context, so that it times 1,024 and 2,048 keys): it writes its
// cache and sets tiers the scratch holds and o_proj's depth (0 or 10, timed at 1,024 keys); the next start
// reads the cache (a hand-edited valid file is taken as it is); a damaged file, or one without the depth, is
// timed again and rewritten; a depth set by hand is neither timed nor replaced.
TEST_F(CudaMatmulTest, AttentionTunerCachesItsTiersAndRetimesADamagedCache) {
  const std::string dir = ::testing::TempDir() + "helium-attention-tune-" + std::to_string(::getpid());
  const char* saved = std::getenv("HELIUM_CACHE_DIR");
  const std::string saved_value = saved != nullptr ? saved : "";
  setenv("HELIUM_CACHE_DIR", dir.c_str(), 1);
  CudaBackendOptions o;
  o.max_rows = 8;
  o.max_context = 2048;
  o.max_heads = 32;
  o.max_head_dim = 128;
  o.max_k = 4096;
  auto backend = CudaBackend::create(o);
  ASSERT_TRUE(backend.is_ok()) << backend.error_message();
  CudaBackend& b = *backend.value();
  const AttentionShape shape{32, 8, 128, 1.0f / std::sqrt(128.0f)};
  const std::string path = b.attention_tuning_cache_path(shape, 4096, DType::BF16, 16, 2048);
  ASSERT_TRUE(b.tune_attention(shape, 4096, DType::BF16, 16, 2048, false).is_ok());
  std::ifstream written(path);
  ASSERT_TRUE(written.good()) << path;
  const nlohmann::json cache = nlohmann::json::parse(written);
  ASSERT_EQ(cache.at("timed").size(), 8u);  // 1,024 and 2,048 keys, four sizes each (32 partitions allowed)
  const auto tiers = b.attention_partition_tiers();
  EXPECT_EQ(tiers[0], cache["tiers"]["small_end"].get<int>());
  EXPECT_EQ(tiers[1], cache["tiers"]["medium_end"].get<int>());
  EXPECT_EQ(tiers[2], cache["tiers"]["large_end"].get<int>());
  EXPECT_LE(cuda::max_partition_count(2048, cuda::PartitionTiers{tiers[0], tiers[1], tiers[2]}), 32);
  const int depth = cache.at("oproj_stages").get<int>();
  EXPECT_TRUE(depth == 0 || depth == 10) << depth;
  EXPECT_EQ(b.attention_oproj_stages(), depth);
  ASSERT_EQ(cache.at("oproj_timed").size(), 2u);  // 0 and 10 stages at 1,024 keys
  EXPECT_EQ(cache["oproj_timed"][0]["keys"].get<int>(), 1024);
  // A valid file is read, not re-timed.
  const int other = depth == 0 ? 10 : 0;
  std::ofstream(path) << R"({"tiers": {"small_end": 0, "medium_end": 2048, "large_end": 2048},)"
                      << R"( "oproj_stages": )" << other << "}";
  ASSERT_TRUE(b.tune_attention(shape, 4096, DType::BF16, 16, 2048, false).is_ok());
  EXPECT_EQ(b.attention_partition_tiers(), (std::array<int, 3>{0, 2048, 2048}));
  EXPECT_EQ(b.attention_oproj_stages(), other);
  // A file without the depth (written while it was set by hand): timed again.
  std::ofstream(path) << R"({"tiers": {"small_end": 0, "medium_end": 2048, "large_end": 2048}})";
  ASSERT_TRUE(b.tune_attention(shape, 4096, DType::BF16, 16, 2048, false).is_ok());
  {
    std::ifstream again(path);
    const nlohmann::json j = nlohmann::json::parse(again);
    EXPECT_EQ(j.at("timed").size(), 8u);
    EXPECT_EQ(b.attention_oproj_stages(), j.at("oproj_stages").get<int>());
  }
  // The depth set by hand: the tiers timed, the depth neither timed, written nor replaced by the file's.
  setenv("HELIUM_CUDA_OPROJ_STAGES", "12", 1);
  auto by_hand = CudaBackend::create(o);
  unsetenv("HELIUM_CUDA_OPROJ_STAGES");
  ASSERT_TRUE(by_hand.is_ok()) << by_hand.error_message();
  setenv("HELIUM_CUDA_OPROJ_STAGES", "12", 1);
  const bool tuned = by_hand.value()->tune_attention(shape, 4096, DType::BF16, 16, 2048, true).is_ok();
  unsetenv("HELIUM_CUDA_OPROJ_STAGES");
  ASSERT_TRUE(tuned);
  EXPECT_EQ(by_hand.value()->attention_oproj_stages(), 12);
  {
    std::ifstream again(path);
    const nlohmann::json j = nlohmann::json::parse(again);
    EXPECT_EQ(j.at("timed").size(), 8u);
    EXPECT_FALSE(j.contains("oproj_stages"));
  }
  // Damaged (cut short; tiers out of order): timed again, the file rewritten.
  for (const char* text : {R"({"tiers": {"small_end": 10)", R"({"tiers": {"small_end": 2048, "medium_end": 1024, "large_end": 4096}})"}) {
    std::ofstream(path) << text;
    ASSERT_TRUE(b.tune_attention(shape, 4096, DType::BF16, 16, 2048, false).is_ok());
    std::ifstream again(path);
    const nlohmann::json j = nlohmann::json::parse(again, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    EXPECT_EQ(j.at("timed").size(), 8u) << text;
    EXPECT_EQ(b.attention_partition_tiers()[0], j["tiers"]["small_end"].get<int>()) << text;
  }
  // retune times again whatever the file holds.
  std::ofstream(path) << R"({"tiers": {"small_end": 0, "medium_end": 2048, "large_end": 2048}})";
  ASSERT_TRUE(b.tune_attention(shape, 4096, DType::BF16, 16, 2048, true).is_ok());
  std::ifstream retuned(path);
  EXPECT_EQ(nlohmann::json::parse(retuned).at("timed").size(), 8u);
  // A model whose hidden size is not its heads' width (as Qwen3-32B's 5,120 against 64 x 128): timed between
  // projections of its own widths, cached under its own key.
  const std::string narrow = b.attention_tuning_cache_path(shape, 2560, DType::BF16, 16, 2048);
  EXPECT_NE(narrow, path);
  ASSERT_TRUE(b.tune_attention(shape, 2560, DType::BF16, 16, 2048, false).is_ok());
  std::ifstream narrow_file(narrow);
  ASSERT_TRUE(narrow_file.good()) << narrow;
  EXPECT_EQ(nlohmann::json::parse(narrow_file).at("timed").size(), 8u);
  if (saved != nullptr) setenv("HELIUM_CACHE_DIR", saved_value.c_str(), 1);
  else unsetenv("HELIUM_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST(CudaMatmulDeathTest, BrokenPreconditionsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  alignas(16) static float fake[64];
  const Tensor x(fake, DType::F32, {2, 8}), w(fake, DType::BF16, {4, 8}), y(fake + 32, DType::F32, {2, 4});
  const cuda::Context ctx;
  EXPECT_DEATH(cuda::matmul(ctx, Tensor(fake, DType::BF16, {2, 8}), w, Tensor(), y), "cuda matmul: check failed");
  EXPECT_DEATH(cuda::matmul(ctx, Tensor(fake, DType::F32, {2, 7}), w, Tensor(), y), "cuda matmul: check failed");
  EXPECT_DEATH(cuda::matmul(ctx, x, w, Tensor(), Tensor(fake + 32, DType::F32, {3, 4})), "cuda matmul: check failed");
  EXPECT_DEATH(cuda::matmul(ctx, x, w, Tensor(fake, DType::F32, {5}), y), "cuda matmul: check failed");
  EXPECT_DEATH(cuda::matmul(ctx, x, w, Tensor(), Tensor(fake + 4, DType::F32, {2, 4})), "cuda matmul: check failed");
  EXPECT_DEATH(cuda::matmul_decode(ctx, x, w, Tensor(), y, MatmulDecodeConfig{3, 4, 4, 1}),
               "cuda matmul_decode: check failed");
}

}  // namespace
}  // namespace helium::test
