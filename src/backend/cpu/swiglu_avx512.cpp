// backend/cpu/swiglu_avx512.cpp — silu(gate) * up, 16 lanes; the tail uses masked loads and stores so every
// element takes the same path (contract in swiglu.h).
#include "backend/cpu/simd_avx512.h"
#include "backend/cpu/swiglu.h"

namespace helium::cpu::avx512 {

namespace {

__m512 swiglu_lanes(__m512 g, __m512 u) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u);
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t count) {
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    _mm512_storeu_ps(out + i, swiglu_lanes(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < count) {
    const __mmask16 m = tail_mask(count - i);
    _mm512_mask_storeu_ps(out + i, m, swiglu_lanes(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace helium::cpu::avx512
