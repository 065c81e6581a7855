// core/softmax_terms.h — the arithmetic the sampler's softmax is defined by (sample/sampler.cpp), shared by
// the sampler and the backends' candidate selection (Backend::select_candidates), written so that a host
// compiler and nvcc give the same bits: exp_det (an exponential made of fused multiply-adds only, no
// library call whose last bit may differ between libm and CUDA's), the fixed summation tree of the
// softmax total (by token id, not by rank, so that it needs no sort and parallelises), and the total of a
// row. A device sampler that uses them reproduces sample_token on the same logits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>

#if defined(__CUDACC__)
#define HELIUM_SAMPLE_HD __host__ __device__
#define HELIUM_SAMPLE_INLINE __attribute__((always_inline))
#else
#define HELIUM_SAMPLE_HD
#define HELIUM_SAMPLE_INLINE __attribute__((always_inline))
#endif

namespace helium {

// p · 2^k for p in [0.5, 2) (exp_det's e^r), the bits ldexp gives: a product by a power of two is exact
// while it stays in the normal range; below it (k < -1022) p is first scaled exactly by 2^(k + 64) and
// the one rounding is the product by 2^-64, as ldexp's is. Without ldexp's library call, which took 18%
// of a host draw over a 151,936-token row (perf, thirtieth session).
HELIUM_SAMPLE_HD HELIUM_SAMPLE_INLINE inline double scale_by_power_of_two(double p, int k) {
  if (k < -1000 - 64 || k > 1023) return std::ldexp(p, k);
  const int e = k < -1022 ? k + 64 : k;
  const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
#if defined(__CUDA_ARCH__)
  const double scale = __longlong_as_double(static_cast<long long>(bits));
#else
  const double scale = std::bit_cast<double>(bits);
#endif
  return k < -1022 ? (p * scale) * 0x1p-64 : p * scale;
}

// exp_det's constants, one definition for it and for its four-lane form (softmax_terms.cpp): log2(e), ln2 in
// two parts (Cody-Waite), and the Taylor coefficients of its Horner steps, exp_det_taylor(i) = 1/(13 - i)!
// (a function, not an array, so that device code may read it).
inline constexpr double kExpDetLog2e = 1.4426950408889634;
inline constexpr double kExpDetLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kExpDetLn2Lo = 1.90821492927058770002e-10;
inline constexpr int kExpDetDegree = 13;
HELIUM_SAMPLE_HD constexpr double exp_det_taylor(int i) {
  constexpr double c[kExpDetDegree + 1] = {1.6059043836821613e-10,  2.08767569878681e-09,   2.505210838544172e-08,
                                           2.755731922398589e-07,   2.7557319223985893e-06, 2.48015873015873e-05,
                                           1.984126984126984e-04,   1.388888888888889e-03,  8.333333333333333e-03,
                                           4.1666666666666664e-02,  1.6666666666666666e-01, 0.5,
                                           1.0,                     1.0};
  return c[i];
}

// e^d for d <= 0 (the softmax terms exp(x - x_max)); 0 below -745 and for NaN. d = k·ln2 + r with
// |r| <= ln2/2 (Cody-Waite: ln2 in two parts, the reductions as fused multiply-adds), e^r by its Taylor
// series to degree 13 in Horner form (the truncation is below 2^-53 there), then scaled by 2^k. Every
// step is a correctly rounded IEEE operation, so the result is a pure function of d on any conforming
// machine. Within a few units in the last place of the true value; exactness against exp() is not the
// point, reproducibility is.
// Always inlined, so that a caller compiled for FMA hardware (sampler.cpp) gets the instruction, not a
// libm call per fma.
HELIUM_SAMPLE_HD HELIUM_SAMPLE_INLINE inline double exp_det(double d) {
  if (!(d > -745.0)) return 0.0;
  using std::fma;
  using std::rint;
  const double k = rint(d * kExpDetLog2e);  // d / ln2, to nearest
  double r = fma(-k, kExpDetLn2Hi, d);
  r = fma(-k, kExpDetLn2Lo, r);
  double p = exp_det_taylor(0);
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif !defined(__CUDACC__)  // (nvcc's host pass knows neither pragma)
#pragma GCC unroll 16
#endif
  for (int i = 1; i <= kExpDetDegree; ++i) p = fma(p, r, exp_det_taylor(i));
  return scale_by_power_of_two(p, static_cast<int>(k));
}

// The softmax total's summation tree: token ids in groups of kSumGroup consecutive ids, each group's terms
// added in increasing id (from +0); the group sums added the same way in groups of kSumGroup; the sums of
// those in increasing order. Tokens outside the kept set count as +0, which changes no sum, so a sparse
// walk over the kept ids in increasing order gives the same bits as the dense one.
constexpr int kSumGroupShift = 6;  // 64 ids per group
class TreeSum {
 public:
  // Adds the term of token `id`; ids must come in increasing order.
  HELIUM_SAMPLE_HD void add(int64_t id, double term) {
    const int64_t g0 = id >> kSumGroupShift, g1 = id >> (2 * kSumGroupShift);
    if (g0 != group0_) flush0(g0);
    if (g1 != group1_) flush1(g1);
    sum0_ += term;
  }
  HELIUM_SAMPLE_HD double total() {
    flush0(-1);
    flush1(-1);
    return sum2_;
  }

 private:
  HELIUM_SAMPLE_HD void flush0(int64_t next) {
    sum1_ += sum0_;
    sum0_ = 0.0;
    group0_ = next;
  }
  HELIUM_SAMPLE_HD void flush1(int64_t next) {
    sum2_ += sum1_;
    sum1_ = 0.0;
    group1_ = next;
  }
  double sum0_ = 0.0, sum1_ = 0.0, sum2_ = 0.0;
  int64_t group0_ = -1, group1_ = -1;
};

#if !defined(__CUDACC__)
// Runs f — exp_det arithmetic, always inlined into it — compiled for FMA hardware where the CPU has it
// (x86-64 builds do not assume it; without it each fma is a libm call, 7x slower): the same correctly
// rounded operations either way, so both give the same bits.
template <class F>
void run_without_fma(F& f) {
  f();
}
#if defined(__x86_64__) && defined(__GNUC__)
template <class F>
__attribute__((target("fma"))) void run_with_fma(F& f) {
  f();
}
template <class F>
void with_fma(F&& f) {
  static const bool fma = __builtin_cpu_supports("fma");
  if (fma) run_with_fma(f);
  else run_without_fma(f);
}
#else
template <class F>
void with_fma(F&& f) {
  run_without_fma(f);
}
#endif

// The softmax terms of a row against a given x_max: terms[t] = exp_det(x - x_max) for x = logits[t] /
// temperature (a float division) where logits[t] > -inf, 0 for -inf and NaN logits; returns their total in
// TreeSum's tree. terms may be null (the total only). Computed four logits at a time where the CPU has
// AVX2 and FMA (the same operations, so the same bits; `simd` false keeps the scalar loop, for tests).
double softmax_row_terms(std::span<const float> logits, float temperature, float x_max, double* terms,
                         bool simd = true);

// The softmax total of a row of logits: the terms exp_det(x - x_max) of every x = logit / temperature
// (a float division) over the logits > -inf, x_max their largest, summed in TreeSum's tree (0 for a row
// without one; the terms, and so the total, are 0 when x_max is +inf).
double softmax_total(std::span<const float> logits, float temperature, bool simd = true);
#endif

}  // namespace helium
