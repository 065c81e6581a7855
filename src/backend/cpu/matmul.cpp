// backend/cpu/matmul.cpp — y = x · wᵀ + bias: the op entry, the work split, and the scalar reference kernel.
#include "backend/cpu/matmul.h"

#include <algorithm>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

namespace {

// Features per unit of work handed to a thread: a multiple of every kernel's feature tile, so a thread's
// range splits into whole tiles (performance only; results do not depend on it).
constexpr int64_t kFeaturesPerTask = 16;
// Rows per row block: the kernels sweep all rows of a block over a tile of w held in L1, so the block of x
// should stay in L2 (1 MiB per core on Zen 4/5, 2 MiB on recent Xeons; half a MiB leaves room for w and
// y). Results do not depend on it.
constexpr int64_t kRowBlockBytes = 512 * 1024;
constexpr int64_t kMaxRowsPerBlock = 256;
// Below this many multiply-adds per thread, waking threads costs more than it saves.
constexpr int64_t kMinMacsPerThread = 64 * 1024;

float weight_at(const void* w, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(w)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
    default: return static_cast<const float*>(w)[i];
  }
}

MatmulKernel pick_kernel(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return avx512::matmul;
    case CpuIsa::Avx2: return avx2::matmul;
    case CpuIsa::Scalar: break;
  }
  return matmul_scalar;
}

}  // namespace

void matmul_scalar(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end) {
  const size_t w_row_bytes = static_cast<size_t>(p.k) * dtype_bytes(p.w_dtype);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* x = p.x + r * p.k;
    for (int64_t j = n_begin; j < n_end; ++j) {
      const void* w = static_cast<const uint8_t*>(p.w) + static_cast<size_t>(j) * w_row_bytes;
      float sum = 0.0f;
      for (int64_t i = 0; i < p.k; ++i) sum += x[i] * weight_at(w, p.w_dtype, i);
      p.y[r * p.n + j] = sum;
    }
  }
}

void matmul(const CpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const OpDescription op("matmul", {{"x", &x}, {"w", &w}, {"bias", &bias}, {"y", &y}});
  HELIUM_CHECK(op, x.data != nullptr && w.data != nullptr && y.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, x.dtype == DType::F32 && y.dtype == DType::F32) << "activations must be F32";
  HELIUM_CHECK(op, is_float_weight(w.dtype)) << "w must be F32, F16 or BF16";
  HELIUM_CHECK(op, w.rank == 2 && w.dim(1) > 0) << "w must be (n, k) with k > 0";
  const int64_t n = w.dim(0), k = w.dim(1), rows = matrix_rows(x);
  HELIUM_CHECK(op, x.rank >= 1 && matrix_cols(x) == k) << "x's last dimension must be w's k";
  HELIUM_CHECK(op, y.rank >= 1 && matrix_cols(y) == n && matrix_rows(y) == rows) << "y must be (rows, n)";
  if (bias.data != nullptr) {
    HELIUM_CHECK(op, is_float_weight(bias.dtype) && bias.rank == 1 && bias.dim(0) == n)
        << "bias must be (n) F32/F16/BF16 or empty";
  }
  HELIUM_CHECK(op, !tensors_overlap(y, x) && !tensors_overlap(y, w) && !tensors_overlap(y, bias))
      << "y overlaps an input";
  if (rows == 0 || n == 0) return;

  const MatmulProblem problem{x.as<float>(), w.data, w.dtype, y.as<float>(), rows, n, k};
  const MatmulKernel kernel = pick_kernel(ctx.isa);

  // Tasks are (row block, feature block) pairs, row-block major, so the contiguous range of tasks a thread
  // gets is a run of neighbouring w rows (one stream through memory for decode).
  const int64_t rows_per_block =
      std::clamp<int64_t>(kRowBlockBytes / std::max<int64_t>(1, k * 4) / 4 * 4, 4, kMaxRowsPerBlock);
  const int64_t row_blocks = (rows + rows_per_block - 1) / rows_per_block;
  const int64_t feature_blocks = (n + kFeaturesPerTask - 1) / kFeaturesPerTask;
  const int64_t macs_per_task = std::min(rows, rows_per_block) * kFeaturesPerTask * std::max<int64_t>(k, 1);
  const int64_t grain = std::max<int64_t>(1, kMinMacsPerThread / macs_per_task);

  parallel_for(ctx.pool, row_blocks * feature_blocks, grain, [&](int64_t begin, int64_t end) {
    int64_t t = begin;
    while (t < end) {
      const int64_t block = t / feature_blocks;
      const int64_t last = std::min(end, (block + 1) * feature_blocks);  // this row block's part of the range
      const int64_t r0 = block * rows_per_block, r1 = std::min(rows, r0 + rows_per_block);
      const int64_t n0 = (t % feature_blocks) * kFeaturesPerTask;
      const int64_t n1 = std::min(n, ((last - 1) % feature_blocks + 1) * kFeaturesPerTask);
      kernel(problem, r0, r1, n0, n1);
      if (bias.data != nullptr) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t j = n0; j < n1; ++j) problem.y[r * n + j] += weight_at(bias.data, bias.dtype, j);
      }
      t = last;
    }
  });
}

}  // namespace helium::cpu
