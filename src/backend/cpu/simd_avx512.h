// backend/cpu/simd_avx512.h — AVX-512 building blocks shared by the *_avx512.cpp kernels.
// Owns: loads of F32/F16/BF16 data into f32 lanes (full and masked tails), the horizontal sum with the one
// lane order every AVX-512 reduction uses, and a vector exp.
// Must not: be included outside *_avx512.cpp (its code needs -mavx512*); everything here lives in
// namespace helium::cpu::avx512 so that no inline function or template instantiation compiled with
// AVX-512 flags shares a symbol with one compiled for a lower ISA (the linker would keep one copy).
#pragma once

// GCC 12's AVX-512 headers feed _mm512_undefined_*() (a self-initialised variable) to masked builtins as
// the unused pass-through operand, which warns falsely once inlined (GCC bug 105593). The warning is
// reported at the header's lines, so silencing it around this include leaves it on for our own code.
// *_avx512.cpp files include this header, never <immintrin.h> first.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

namespace helium::cpu::avx512 {

constexpr int kLanes = 16;

// Lanes [0, n) set, for tails of fewer than kLanes elements.
inline __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// Element loaders: `load(p, i)` converts 16 elements starting at element i of p to f32 (exactly: every
// F16 and BF16 value is an f32 value); `load_tail(p, i, m)` loads the lanes of mask m and zeroes the rest.
struct LoadF32 {
  static __m512 load(const void* p, int64_t i) { return _mm512_loadu_ps(static_cast<const float*>(p) + i); }
  static __m512 load_tail(const void* p, int64_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
  }
};
struct LoadBF16 {
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const void* p, int64_t i) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
  }
  static __m512 load_tail(const void* p, int64_t i, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
  }
};
struct LoadF16 {
  static __m512 load(const void* p, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
  }
  static __m512 load_tail(const void* p, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
  }
};

// Rounds 16 f32 values to BF16 (nearest even; NaN stays NaN), as core/dtype.h's f32_to_bf16 does.
inline __m256i round_to_bf16(__m512 v) {
  __m512i bits = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, nan, bits, _mm512_set1_epi32(0x400000));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

// The sum of the 16 lanes in a fixed order: halves added pairwise (lane i + lane i+8, then +4, +2, +1).
// Every AVX-512 reduction ends here, which is what makes results independent of the kernel shape.
inline float hsum(__m512 v) {
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

inline float hmax(__m512 v) {
  __m256 s8 = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_max_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

// exp(x), within about 2 ulp of the exact value for normal results. x = n·ln2 + r with |r| <= ln2/2
// (ln2 split into a part with few mantissa bits, so n·ln2_hi is exact, and a correction); exp(r) by its
// Taylor polynomial of degree 7 (truncation error r^8/8! < 6e-9, below half an ulp); 2^n applied by
// scalef, which also gives 0 for large negative x (and for -inf, clamped first) and inf for large x.
inline __m512 exp(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-110.0f)), _mm512_set1_ps(100.0f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace helium::cpu::avx512
