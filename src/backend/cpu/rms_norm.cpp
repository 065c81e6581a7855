// backend/cpu/rms_norm.cpp — y = x / sqrt(mean(x²) + eps) * w (or * (1 + w), zero-centred), per row.
// One scalar kernel serves every ISA: the norm is a few thousand flops per row against the millions of its
// neighbouring matmuls (under 1% of a layer), so a SIMD variant would add a second rounding order to test
// for no measurable gain. The sum of squares runs in one f32 accumulator in index order.
#include <algorithm>
#include <cmath>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

namespace {

constexpr int64_t kMinElementsPerThread = 32 * 1024;

float weight_at(const void* w, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(w)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
    default: return static_cast<const float*>(w)[i];
  }
}

// x and y may be the same row: every x[i] is read before y[i] is written.
void rms_norm_row(const float* x, const void* w, DType w_dtype, int64_t dim, float eps, bool zero_centred,
                  float* y) {
  float sum_squares = 0.0f;
  for (int64_t i = 0; i < dim; ++i) sum_squares += x[i] * x[i];
  // As the Hugging Face reference: x * rsqrt(mean + eps), then times the weight, all in f32.
  const float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) {
    const float wi = weight_at(w, w_dtype, i);
    y[i] = (x[i] * inv_rms) * (zero_centred ? 1.0f + wi : wi);
  }
}

}  // namespace

void rms_norm(const CpuContext& ctx, const Tensor& x, const Tensor& w, float eps, bool zero_centred,
              const Tensor& y) {
  const OpDescription op("rms_norm", {{"x", &x}, {"w", &w}, {"y", &y}});
  HELIUM_CHECK(op, x.data != nullptr && w.data != nullptr && y.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, x.dtype == DType::F32 && y.dtype == DType::F32) << "x and y must be F32";
  HELIUM_CHECK(op, is_float_weight(w.dtype) && w.rank == 1) << "w must be (dim) F32/F16/BF16";
  const int64_t dim = w.dim(0), rows = matrix_rows(x);
  HELIUM_CHECK(op, x.rank >= 1 && matrix_cols(x) == dim && dim > 0) << "x's last dimension must be w's dim";
  HELIUM_CHECK(op, matrix_cols(y) == dim && matrix_rows(y) == rows) << "y must be shaped like x";
  HELIUM_CHECK(op, y.data == x.data || !tensors_overlap(y, x)) << "y must be x itself or not overlap it";
  HELIUM_CHECK(op, eps >= 0.0f) << "eps = " << eps;

  parallel_for(ctx.pool, rows, std::max<int64_t>(1, kMinElementsPerThread / dim), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      rms_norm_row(x.as<float>() + r * dim, w.data, w.dtype, dim, eps, zero_centred, y.as<float>() + r * dim);
  });
}

}  // namespace helium::cpu
