#include "core/softmax_terms.h"

#include <algorithm>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HELIUM_SOFTMAX_AVX2 1
#endif

namespace helium {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kGroup = 1 << kSumGroupShift;  // the ids of one group of the total's tree

// One term, the definition's: exp_det(x - x_max) for x = logit / temperature, 0 for a -inf or NaN logit.
HELIUM_SAMPLE_INLINE inline double term_of(float logit, float temperature, float x_max) {
  return logit > kNegInf ? exp_det(static_cast<double>(logit / temperature) - x_max) : 0.0;
}

// The row's terms one at a time, summed group by group. A -inf or NaN logit adds +0 to a sum of terms
// >= +0, which leaves its bits as they are: the same total as the tree over the valid ids alone.
double row_terms_scalar(std::span<const float> logits, float temperature, float x_max, double* terms) {
  double total = 0.0;
  with_fma([&]() __attribute__((always_inline)) {
    TreeSum sum;
    double group[kGroup];
    for (size_t g = 0; g < logits.size(); g += kGroup) {
      const int m = static_cast<int>(std::min<size_t>(kGroup, logits.size() - g));
      double* out = terms != nullptr ? terms + g : group;
      for (int j = 0; j < m; ++j) out[j] = term_of(logits[g + j], temperature, x_max);
      for (int j = 0; j < m; ++j) sum.add(static_cast<int64_t>(g + j), out[j]);
    }
    total = sum.total();
  });
  return total;
}

float row_x_max_scalar(std::span<const float> logits, float temperature) {
  float x_max = kNegInf;
  for (float l : logits)
    if (l > kNegInf) x_max = std::max(x_max, l / temperature);
  return x_max;
}

#if HELIUM_SOFTMAX_AVX2
bool has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// Four terms at a time: exp_det's operations lane by lane (the division in float, the conversion, the
// subtraction, d · log2(e) rounded to nearest, the two reductions and the Horner steps as fused
// multiply-adds, the product by 2^k), each IEEE-rounded as the scalar instruction is, so the same bits.
// The lanes take the formula without branches where d is in (-708, 0] — k in [-1021, 0], where 2^k is
// normal and exp_det's scaling is one product; any other valid lane (a term near underflow, a NaN from
// +inf - +inf) is recomputed by exp_det itself.
__attribute__((target("avx2,fma"))) double row_terms_avx2(std::span<const float> logits, float temperature,
                                                          float x_max, double* terms) {
  const __m128 neg_inf = _mm_set1_ps(kNegInf), t = _mm_set1_ps(temperature);
  const __m256d xm = _mm256_set1_pd(static_cast<double>(x_max));
  const __m256d lowest = _mm256_set1_pd(-708.0), zero = _mm256_setzero_pd();
  const __m256d log2e = _mm256_set1_pd(kExpDetLog2e);
  const __m256d ln2_hi = _mm256_set1_pd(kExpDetLn2Hi), ln2_lo = _mm256_set1_pd(kExpDetLn2Lo);
  const __m256i bias = _mm256_set1_epi64x(1023);
  constexpr int kBlock = 4 * kGroup;  // four groups: their sums are four independent chains of additions
  TreeSum sum;
  alignas(32) double block[kBlock];
  for (size_t b = 0; b < logits.size(); b += kBlock) {
    const int m = static_cast<int>(std::min<size_t>(kBlock, logits.size() - b));
    const float* l = logits.data() + b;
    int j = 0;
    for (; j + 4 <= m; j += 4) {
      const __m128 lv = _mm_loadu_ps(l + j);
      const __m128 valid = _mm_cmp_ps(lv, neg_inf, _CMP_GT_OQ);
      const __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_div_ps(lv, t)), xm);
      const __m256d fast = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(d, lowest, _CMP_GT_OQ), _mm256_cmp_pd(d, zero, _CMP_LE_OQ)),
                                         _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm_castps_si128(valid))));
      const __m256d dv = _mm256_and_pd(d, fast);  // +0 in the other lanes
      const __m256d k = _mm256_round_pd(_mm256_mul_pd(dv, log2e), _MM_FROUND_CUR_DIRECTION);  // rint
      __m256d r = _mm256_fnmadd_pd(k, ln2_hi, dv);  // -(k · c) + d = fma(-k, c, d)
      r = _mm256_fnmadd_pd(k, ln2_lo, r);
      __m256d p = _mm256_set1_pd(exp_det_taylor(0));
#pragma GCC unroll 16
      for (int i = 1; i <= kExpDetDegree; ++i) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(exp_det_taylor(i)));
      const __m256i e = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k)), bias), 52);
      _mm256_store_pd(block + j, _mm256_and_pd(_mm256_mul_pd(p, _mm256_castsi256_pd(e)), fast));
      const int slow = _mm256_movemask_pd(fast) ^ _mm_movemask_ps(valid);  // valid, outside (-708, 0]
      for (int q = 0; q < 4; ++q)
        if ((slow >> q) & 1) block[j + q] = exp_det(static_cast<double>(l[j + q] / temperature) - x_max);
    }
    for (; j < m; ++j) block[j] = term_of(l[j], temperature, x_max);
    for (; j < kBlock; ++j) block[j] = 0.0;  // past the row: +0 changes no sum
    if (terms != nullptr) std::copy(block, block + m, terms + b);
    // Each group's terms added in increasing id from +0, the four groups side by side; a group's sum
    // given to the tree as one term of its first id is what adding its terms one by one leaves in it.
    __m256d group_sums = _mm256_setzero_pd();
    for (int i = 0; i < kGroup; ++i)
      group_sums = _mm256_add_pd(group_sums, _mm256_set_pd(block[3 * kGroup + i], block[2 * kGroup + i],
                                                           block[kGroup + i], block[i]));
    alignas(32) double sums[4];
    _mm256_store_pd(sums, group_sums);
    for (int q = 0; q < 4 && q * kGroup < m; ++q) sum.add(static_cast<int64_t>(b) + q * kGroup, sums[q]);
  }
  return sum.total();
}

// The largest x over the valid logits, eight at a time. Only the sign of a zero maximum may differ from
// the scalar loop's, which changes no term: x - (+0) and x - (-0) are equal but for x = ±0, whose terms
// are 1 either way.
__attribute__((target("avx2"))) float row_x_max_avx2(std::span<const float> logits, float temperature) {
  const __m256 neg_inf = _mm256_set1_ps(kNegInf), t = _mm256_set1_ps(temperature);
  __m256 best = neg_inf;
  size_t i = 0;
  for (; i + 8 <= logits.size(); i += 8) {
    const __m256 lv = _mm256_loadu_ps(logits.data() + i);
    const __m256 valid = _mm256_cmp_ps(lv, neg_inf, _CMP_GT_OQ);
    best = _mm256_max_ps(best, _mm256_blendv_ps(neg_inf, _mm256_div_ps(lv, t), valid));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, best);
  float x_max = kNegInf;
  for (float x : lanes) x_max = std::max(x_max, x);
  for (; i < logits.size(); ++i)
    if (logits[i] > kNegInf) x_max = std::max(x_max, logits[i] / temperature);
  return x_max;
}
#endif

}  // namespace

double softmax_row_terms(std::span<const float> logits, float temperature, float x_max, double* terms, bool simd) {
#if HELIUM_SOFTMAX_AVX2
  if (simd && has_avx2_fma()) return row_terms_avx2(logits, temperature, x_max, terms);
#endif
  (void)simd;
  return row_terms_scalar(logits, temperature, x_max, terms);
}

double softmax_total(std::span<const float> logits, float temperature, bool simd) {
  float x_max = kNegInf;
#if HELIUM_SOFTMAX_AVX2
  if (simd && has_avx2_fma()) x_max = row_x_max_avx2(logits, temperature);
  else x_max = row_x_max_scalar(logits, temperature);
#else
  x_max = row_x_max_scalar(logits, temperature);
#endif
  if (x_max == kNegInf) return 0.0;
  return softmax_row_terms(logits, temperature, x_max, nullptr, simd);
}

}  // namespace helium
