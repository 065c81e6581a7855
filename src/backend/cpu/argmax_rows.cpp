// backend/cpu/argmax_rows.cpp — out[r] = index of the largest x[r][i], the lowest index among equal ones,
// by the sampler's greedy scan (best = 0; replace when strictly larger), so NaN never wins and a NaN at
// index 0 keeps 0. Exact comparisons only: one kernel serves every ISA.
#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

void argmax_rows(const CpuContext& ctx, const Tensor& x, const Tensor& out) {
  const OpDescription op("argmax_rows", {{"x", &x}, {"out", &out}});
  HELIUM_CHECK(op, x.data != nullptr && out.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, x.dtype == DType::F32 && out.dtype == DType::I32) << "x must be F32 and out I32";
  HELIUM_CHECK(op, x.rank >= 1 && x.shape[x.rank - 1] >= 1) << "x must have at least one column";
  const int64_t n = x.shape[x.rank - 1], rows = x.numel() / n;
  HELIUM_CHECK(op, out.numel() == rows) << "out must have one element per row of x";
  const float* xs = x.as<float>();
  int32_t* o = out.as<int32_t>();
  parallel_for(ctx.pool, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = xs + r * n;
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i)
        if (row[i] > row[best]) best = i;
      o[r] = static_cast<int32_t>(best);
    }
  });
}

}  // namespace helium::cpu
