// backend/cpu/swiglu.cpp — out = silu(gate) * up: the op entry and the scalar reference kernel (std::exp).
// The SIMD kernels use a polynomial exp (simd_*.h), so results differ between ISAs in the last bits.
#include "backend/cpu/swiglu.h"

#include <cmath>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void swiglu(const CpuContext& ctx, const Tensor& gate, const Tensor& up, const Tensor& out) {
  const OpDescription op("swiglu", {{"gate", &gate}, {"up", &up}, {"out", &out}});
  HELIUM_CHECK(op, gate.data != nullptr && up.data != nullptr && out.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, gate.dtype == DType::F32 && up.dtype == DType::F32 && out.dtype == DType::F32) << "must be F32";
  HELIUM_CHECK(op, gate.numel() == up.numel() && gate.numel() == out.numel() &&
                       matrix_cols(gate) == matrix_cols(up) && matrix_cols(gate) == matrix_cols(out))
      << "shapes must match";
  HELIUM_CHECK(op, (out.data == gate.data || !tensors_overlap(out, gate)) && !tensors_overlap(out, up))
      << "out must be gate itself or not overlap the inputs";

  SwigluKernel kernel = swiglu_scalar;
  if (ctx.isa == CpuIsa::Avx512) kernel = avx512::swiglu;
  if (ctx.isa == CpuIsa::Avx2) kernel = avx2::swiglu;
  const float* g = gate.as<float>();
  const float* u = up.as<float>();
  float* o = out.as<float>();
  parallel_for(ctx.pool, out.numel(), 16 * 1024,
               [&](int64_t begin, int64_t end) { kernel(g + begin, u + begin, o + begin, end - begin); });
}

}  // namespace helium::cpu
