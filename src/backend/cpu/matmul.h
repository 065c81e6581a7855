// backend/cpu/matmul.h — the matmul kernels' shared contract (entry in matmul.cpp, kernels in
// matmul.cpp (scalar), matmul_avx2.cpp, matmul_avx512.cpp).
// Must not: hold inline code or include backend.h: this header is compiled with each ISA's flags, and an
// inline function emitted by an AVX-512 file could be the copy the linker keeps for a scalar caller.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace helium::cpu {

// y(rows, n) = x(rows, k) · w(n, k)ᵀ, with every element of y reduced over k in one order that depends
// only on k and the ISA: lane j of one f32 vector accumulator takes x[i]·w[i] (one FMA) for i ≡ j (mod
// lanes) in increasing i, the last vector zero-padded when the lanes do not divide k; then the lanes are
// summed in the ISA's fixed order (simd_*.h hsum). The scalar kernel adds x[i]·w[i] for i = 0..k-1 into
// one f32 sum. Kernels may tile rows and features in any way: no tiling changes an element's order.
// The bias is added by the entry afterwards (one rounding, the same for every ISA).
struct MatmulProblem {
  const float* x;  // (rows, k)
  const void* w;   // (n, k) of w_dtype
  DType w_dtype;   // F32, F16 or BF16
  float* y;        // (rows, n)
  int64_t rows, n, k;
};

// Computes y[row_begin, row_end) x [n_begin, n_end).
using MatmulKernel = void (*)(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin,
                              int64_t n_end);

void matmul_scalar(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end);
namespace avx2 {
void matmul(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end);
}
namespace avx512 {
void matmul(const MatmulProblem& p, int64_t row_begin, int64_t row_end, int64_t n_begin, int64_t n_end);
}

}  // namespace helium::cpu
