// backend/cpu/swiglu_avx2.cpp — silu(gate) * up, 8 lanes; the tail is zero-padded so every element takes
// the same path (contract in swiglu.h).
#include <immintrin.h>

#include "backend/cpu/simd_avx2.h"
#include "backend/cpu/swiglu.h"

namespace helium::cpu::avx2 {

namespace {

__m256 swiglu_lanes(__m256 g, __m256 u) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t count) {
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    _mm256_storeu_ps(out + i, swiglu_lanes(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < count) {
    const int tail = static_cast<int>(count - i);
    store_tail(out + i, swiglu_lanes(LoadF32::load_tail(gate, i, tail), LoadF32::load_tail(up, i, tail)), tail);
  }
}

}  // namespace helium::cpu::avx2
