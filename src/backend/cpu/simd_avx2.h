// backend/cpu/simd_avx2.h — AVX2 + FMA + F16C building blocks shared by the *_avx2.cpp kernels.
// Owns: loads of F32/F16/BF16 data into f32 lanes (full and zero-padded tails), the horizontal sum with the
// one lane order every AVX2 reduction uses, and a vector exp.
// Must not: be included outside *_avx2.cpp (its code needs -mavx2 -mfma -mf16c); everything lives in
// namespace helium::cpu::avx2 so no symbol compiled with these flags is shared with another ISA's code.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace helium::cpu::avx2 {

constexpr int kLanes = 8;

// Element loaders: `load(p, i)` converts 8 elements starting at element i of p to f32 (exactly);
// `load_tail(p, i, n)` loads n < 8 elements and zeroes the other lanes, without reading past element i+n.
struct LoadF32 {
  static __m256 load(const void* p, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); }
  static __m256 load_tail(const void* p, int64_t i, int n) {
    alignas(32) float buf[kLanes] = {};
    std::memcpy(buf, static_cast<const float*>(p) + i, static_cast<size_t>(n) * sizeof(float));
    return _mm256_load_ps(buf);
  }
};
struct LoadBF16 {
  static __m256 widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  static __m256 load(const void* p, int64_t i) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
  }
  static __m256 load_tail(const void* p, int64_t i, int n) {
    alignas(16) uint16_t buf[kLanes] = {};
    std::memcpy(buf, static_cast<const uint16_t*>(p) + i, static_cast<size_t>(n) * sizeof(uint16_t));
    return widen(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  }
};
struct LoadF16 {
  static __m256 load(const void* p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
  }
  static __m256 load_tail(const void* p, int64_t i, int n) {
    alignas(16) uint16_t buf[kLanes] = {};
    std::memcpy(buf, static_cast<const uint16_t*>(p) + i, static_cast<size_t>(n) * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  }
};

inline void store_tail(float* p, __m256 v, int n) {
  alignas(32) float buf[kLanes];
  _mm256_store_ps(buf, v);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
}

// Rounds 8 f32 values to BF16 (nearest even; NaN stays NaN), as core/dtype.h's f32_to_bf16 does.
inline __m128i round_to_bf16(__m256 v) {
  __m256i bits = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x400000));
  rounded = _mm256_blendv_epi8(rounded, quiet, nan);
  __m256i high = _mm256_srli_epi32(rounded, 16);
  // Pack the 8 low halves (values < 65536, so unsigned saturation keeps them) into 8 uint16.
  __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1));
  return packed;
}

// The sum of the 8 lanes in a fixed order: lane i + lane i+4, then +2, then +1. Every AVX2 reduction
// ends here, which is what makes results independent of the kernel shape.
inline float hsum(__m256 v) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

inline float hmax(__m256 v) {
  __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 s2 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_max_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

// exp(x), within about 2 ulp for normal results; same reduction and polynomial as the AVX-512 version
// (simd_avx512.h). Without scalef, 2^n is built in the exponent field, so n is kept in [-126, 127]:
// x below -87.3 gives 0 (true results there are subnormal or 0) and above 88.7 gives inf.
inline __m256 exp(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.72283f);
  __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  __m256 overflow = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n in [-126, 128]: 2^n split as 2^(n - n/2) · 2^(n/2) keeps both factors' exponent fields valid.
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i half = _mm256_srai_epi32(ni, 1);
  __m256 scale_a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  __m256 scale_b = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, scale_a), scale_b);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), underflow);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), overflow);
  return y;
}

}  // namespace helium::cpu::avx2
