// backend/cpu/add.cpp — out = a + b elementwise. One f32 addition per element is exact-rounded the same
// way by any instruction set, so the compiler's vectorisation of one scalar loop serves every ISA.
#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

void add(const CpuContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out) {
  const OpDescription op("add", {{"a", &a}, {"b", &b}, {"out", &out}});
  HELIUM_CHECK(op, a.data != nullptr && b.data != nullptr && out.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, a.dtype == DType::F32 && b.dtype == DType::F32 && out.dtype == DType::F32) << "must be F32";
  HELIUM_CHECK(op, a.numel() == b.numel() && a.numel() == out.numel() && matrix_cols(a) == matrix_cols(b) &&
                       matrix_cols(a) == matrix_cols(out))
      << "shapes must match";
  HELIUM_CHECK(op, (out.data == a.data || !tensors_overlap(out, a)) && (out.data == b.data || !tensors_overlap(out, b)))
      << "out must be a or b itself, or not overlap them";
  const float* pa = a.as<float>();
  const float* pb = b.as<float>();
  float* po = out.as<float>();
  parallel_for(ctx.pool, out.numel(), 64 * 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
  });
}

}  // namespace helium::cpu
