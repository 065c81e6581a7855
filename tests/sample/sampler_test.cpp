#include "core/candidate_order.h"
#include "sample/sampler.h"
#include "core/softmax_terms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

namespace helium {
namespace {

int32_t draw(const std::vector<float>& logits, const SamplingParams& p, double u, std::vector<int32_t> context = {},
             size_t output_len = 0) {
  SamplerScratch s;
  return sample_token(logits, p, context, output_len, u, s);
}

// Frequencies over a uniform grid of u values: exactly the inverse-CDF masses.
std::map<int32_t, int> histogram(const std::vector<float>& logits, const SamplingParams& p, int n = 10000) {
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) h[draw(logits, p, (i + 0.5) / n)]++;
  return h;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(draw({0.1f, 3.0f, -1.0f, 3.0f}, p, 0.99), 1);
  p.temperature = 1;
  p.top_k = 1;
  EXPECT_EQ(draw({0.1f, 3.0f, -1.0f, 3.0f}, p, 0.99), 1);
}

TEST(Sampler, InverseCdfFollowsSoftmax) {
  SamplingParams p;
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  auto h = histogram(logits, p);
  EXPECT_NEAR(h[0], 5000, 1);
  EXPECT_NEAR(h[1], 3000, 1);
  EXPECT_NEAR(h[2], 2000, 1);
  // Temperature 0.5 squares the odds: 25:9:4.
  p.temperature = 0.5f;
  h = histogram(logits, p, 38000);
  EXPECT_NEAR(h[0], 25000, 2);
  EXPECT_NEAR(h[1], 9000, 2);
  EXPECT_NEAR(h[2], 4000, 2);
}

TEST(Sampler, TopKTopPMinPTruncate) {
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p;
  p.top_k = 2;
  auto h = histogram(logits, p, 7000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_NEAR(h[0], 4000, 1);
  p = SamplingParams();
  p.top_p = 0.65f;  // 0.4 + 0.3 reaches it
  h = histogram(logits, p);
  EXPECT_EQ(h.size(), 2u);
  p = SamplingParams();
  p.min_p = 0.45f;  // keep p >= 0.18: tokens 0, 1, 2
  h = histogram(logits, p, 9000);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_NEAR(h[2], 2000, 1);
}

TEST(Sampler, RepetitionPenaltyFollowsHuggingFace) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  // Token 0 (logit 3, seen) becomes 1.5 < 2; token 2 (logit -1, seen) becomes -2.
  EXPECT_EQ(draw({3.0f, 2.0f, -1.0f}, p, 0.5, {0, 2}), 1);
  EXPECT_EQ(draw({3.0f, 2.0f, -1.0f}, p, 0.5, {2}), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSeeOnlyOutput) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.6f;
  // Token 0 appears twice in the output: 3.0 - 1.2 = 1.8 < 2.0.
  EXPECT_EQ(draw({3.0f, 2.0f}, p, 0.5, {1, 0, 0}, 2), 1);
  // The same tokens in the prompt only: no penalty.
  EXPECT_EQ(draw({3.0f, 2.0f}, p, 0.5, {0, 0, 1}, 1), 0);
  p = SamplingParams();
  p.temperature = 0;
  p.presence_penalty = 1.5f;
  EXPECT_EQ(draw({3.0f, 2.0f}, p, 0.5, {0}, 1), 1);
}

TEST(Sampler, LogitBiasApplies) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{2, 10.0f}};
  EXPECT_EQ(draw({3.0f, 2.0f, 0.0f}, p, 0.5), 2);
  p.logit_bias = {{0, -INFINITY}};
  EXPECT_NE(validate_sampling(p, 3), "");  // non-finite bias is refused
}

TEST(Sampler, ValidationNamesTheField) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_NE(validate_sampling(p, 10).find("top_p"), std::string::npos);
  p = SamplingParams();
  p.temperature = -1;
  EXPECT_NE(validate_sampling(p, 10).find("temperature"), std::string::npos);
  p = SamplingParams();
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(validate_sampling(p, 10).find("logit_bias"), std::string::npos);
  EXPECT_EQ(validate_sampling(SamplingParams(), 10), "");
}

// The definition of sampling after the logit processors (sampler.cpp, version 2), written plainly: every
// candidate sorted with std::sort, the total summed over every token id (+0 for the ones not kept) in
// softmax_terms.h's tree. sample_token ranks only as many candidates as its draw looks at; it must return
// the same token for every input.
int32_t reference_pick(const std::vector<float>& logits, const SamplingParams& p, double u) {
  std::vector<std::pair<float, int32_t>> c;
  for (int32_t t = 0; t < static_cast<int32_t>(logits.size()); ++t)
    if (logits[t] > -std::numeric_limits<float>::infinity()) c.emplace_back(logits[t] / p.temperature, t);
  if (c.empty()) return 0;
  auto better = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  std::sort(c.begin(), c.end(), better);
  const float x_max = c[0].first;
  if (x_max == std::numeric_limits<float>::infinity()) return c[0].second;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(static_cast<size_t>(p.top_k));
  std::vector<double> term_of_id(logits.size(), 0.0);
  for (const auto& [x, id] : c) term_of_id[id] = exp_det(static_cast<double>(x) - x_max);
  TreeSum all;
  for (size_t id = 0; id < logits.size(); ++id) all.add(static_cast<int64_t>(id), term_of_id[id]);
  const double total = all.total();
  auto prob = [&](size_t i) { return exp_det(static_cast<double>(c[i].first) - x_max) / total; };
  size_t n = c.size();
  if (p.top_p < 1.0f) {
    double cum = 0;
    size_t i = 0;
    while (i < c.size()) {
      cum += prob(i++);
      if (cum >= p.top_p) break;
    }
    n = i;
  }
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * prob(0);
    size_t j = 1;
    while (j < n && prob(j) >= floor) ++j;
    n = j;
  }
  double mass = 1.0;
  if (n < c.size()) {
    std::vector<double> set_term(logits.size(), 0.0);
    for (size_t i = 0; i < n; ++i) set_term[c[i].second] = exp_det(static_cast<double>(c[i].first) - x_max);
    TreeSum set;
    for (size_t id = 0; id < logits.size(); ++id) set.add(static_cast<int64_t>(id), set_term[id]);
    mass = set.total() / total;
  }
  const double target = u * mass;
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += prob(i);
    if (target < cum) return c[i].second;
  }
  return c[n - 1].second;
}

TEST(Sampler, ExpDetIsCloseToExpAndExactWhereItMustBe) {
  EXPECT_EQ(exp_det(0.0), 1.0);
  EXPECT_EQ(exp_det(-800.0), 0.0);
  EXPECT_EQ(exp_det(std::nan("")), 0.0);
  EXPECT_EQ(exp_det(-std::numeric_limits<double>::infinity()), 0.0);
  double worst = 0;
  for (double d = -700.0; d <= 0.0; d += 0.00731) worst = std::max(worst, std::fabs(exp_det(d) - std::exp(d)) / std::exp(d));
  EXPECT_LT(worst, 4e-16);  // about one unit in the last place
}

// exp_det's last step scales by 2^k without ldexp; it must give ldexp's bits for every k exp_det can
// reach (d in (-745, 0]: k in [-1075, 0]), the subnormal results included, and beyond.
TEST(Sampler, PowerOfTwoScalingHasLdexpsBits) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> mantissa(0.5, 2.0);
  int checked = 0;
  for (int k = -1100; k <= 1030; ++k) {
    for (int i = 0; i < 40; ++i) {
      const double p = i == 0 ? 0.5 : i == 1 ? std::nextafter(2.0, 0.0) : mantissa(rng);
      const double want = std::ldexp(p, k), got = scale_by_power_of_two(p, k);
      ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << p << " * 2^" << k;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2131 * 40);
  EXPECT_GT(exp_det(-744.0), 0.0);  // a subnormal term
}

TEST(Sampler, SamePicksAsThePlainDefinitionOnEveryKindOfRow) {
  std::mt19937 rng(7);
  // u = 1 is outside philox_uniform's range, but it is the one value that walks off the end of the kept
  // candidates (the last one is the answer), the case in which sample_token must look past its cut.
  const double u_edges[] = {0.0, 0.5, 0.999, 1.0 - 0x1.0p-53, 1.0};
  int checked = 0, differing = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int vocab = trial % 50 == 0 ? 151936 : std::uniform_int_distribution<int>(1, 5000)(rng);
    std::vector<float> logits(vocab);
    const int kind = trial % 6;
    const float spread = std::array<float, 4>{0.5f, 3.0f, 10.0f, 40.0f}[trial % 4];
    std::normal_distribution<float> normal(0.0f, spread);
    for (float& x : logits) {
      x = normal(rng);
      if (kind == 1) x = std::round(x);  // many ties
      if (kind == 2 && std::uniform_int_distribution<int>(0, 9)(rng) == 0) x = -INFINITY;
      if (kind == 3 && std::uniform_int_distribution<int>(0, 9)(rng) == 0) x = std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0f : -0.0f;
      if (kind == 4) x = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 30.0f : -30.0f;  // a flat top, a far tail
    }
    if (kind == 5) logits[std::uniform_int_distribution<int>(0, vocab - 1)(rng)] = 60.0f;  // one dominant token
    SamplingParams p;
    p.temperature = std::array<float, 4>{0.3f, 0.7f, 1.0f, 1.7f}[(trial / 4) % 4];
    p.top_k = std::array<int, 6>{0, 0, 5, 50, 1000, 1 << 20}[(trial / 16) % 6];
    p.top_p = std::array<float, 3>{1.0f, 0.95f, 0.5f}[(trial / 3) % 3];
    p.min_p = std::array<float, 3>{0.0f, 0.05f, 1e-30f}[(trial / 5) % 3];
    SamplerScratch scratch;
    std::vector<double> us(u_edges, u_edges + 5);
    for (int i = 0; i < 5; ++i) us.push_back(std::uniform_real_distribution<double>(0.0, 1.0)(rng));
    for (double u : us) {
      const int32_t fast = sample_token(logits, p, {}, 0, u, scratch);
      const int32_t full = reference_pick(logits, p, u);
      differing += fast != full;
      ++checked;
      EXPECT_EQ(fast, full) << "vocab " << vocab << " kind " << kind << " T " << p.temperature << " top_k " << p.top_k
                            << " top_p " << p.top_p << " min_p " << p.min_p << " u " << u;
    }
  }
  EXPECT_EQ(checked, 4000);
  EXPECT_EQ(differing, 0);
}

// A row of `vocab` logits of one kind, normal with the given spread: smooth, with many ties, a tenth -inf,
// a fifth signed zeros, a flat top over a far tail, or only about 1% of them valid (the rest -inf).
enum class RowKind { kSmooth, kTies, kSomeNegInf, kSignedZeros, kFlatTop, kFewValid };
std::vector<float> random_row(int vocab, RowKind kind, float spread, std::mt19937& rng) {
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::normal_distribution<float> normal(0.0f, spread);
  for (float& x : logits) {
    x = normal(rng);
    if (kind == RowKind::kTies) x = std::round(x);
    if (kind == RowKind::kSomeNegInf && std::uniform_int_distribution<int>(0, 9)(rng) == 0) x = -INFINITY;
    if (kind == RowKind::kSignedZeros && std::uniform_int_distribution<int>(0, 4)(rng) == 0)
      x = std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0f : -0.0f;
    if (kind == RowKind::kFlatTop) x = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 30.0f : -30.0f;
    if (kind == RowKind::kFewValid && std::uniform_int_distribution<int>(0, 99)(rng) != 0) x = -INFINITY;
  }
  return logits;
}

// A row's best top_k candidates (x = logit / T, id), plus `extra` others, shuffled: what a device may hand
// back (Backend::select_candidates: a superset in any order, as two arrays).
struct CandidateSet {
  std::vector<float> x;
  std::vector<int32_t> ids;
};
CandidateSet candidate_superset(const std::vector<float>& logits, const SamplingParams& p, int extra, std::mt19937& rng,
                                int64_t& valid) {
  std::vector<ScoredToken> all;
  for (int32_t t = 0; t < static_cast<int32_t>(logits.size()); ++t)
    if (logits[t] > -INFINITY) all.emplace_back(logits[t] / p.temperature, t);
  valid = static_cast<int64_t>(all.size());
  std::sort(all.begin(), all.end(), ranks_before);
  const size_t keep = std::min(all.size(), static_cast<size_t>(p.top_k) + static_cast<size_t>(extra));
  all.resize(keep);
  std::shuffle(all.begin(), all.end(), rng);
  CandidateSet set;
  for (const auto& [x, id] : all) {
    set.x.push_back(x);
    set.ids.push_back(id);
  }
  return set;
}

// sample_from_candidates on any superset of the best top_k candidates gives sample_token's token: rows with
// ties, -inf, signed zeros, a flat top, one dominant token, fewer valid tokens than top_k; every setting
// of top_p and min_p; u at the edges.
TEST(Sampler, FromCandidatesIsSampleTokenOnTheWholeRow) {
  std::mt19937 rng(8);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int vocab = trial % 60 == 0 ? 151936 : std::uniform_int_distribution<int>(1, 3000)(rng);
    const int kind = trial % 7;  // the RowKinds, and 5: one dominant token
    const RowKind kinds[] = {RowKind::kSmooth, RowKind::kTies,   RowKind::kSomeNegInf, RowKind::kSignedZeros,
                             RowKind::kFlatTop, RowKind::kSmooth, RowKind::kFewValid};
    std::vector<float> logits = random_row(vocab, kinds[kind], std::array<float, 3>{0.5f, 3.0f, 20.0f}[trial % 3], rng);
    if (kind == 5) logits[static_cast<size_t>(std::uniform_int_distribution<int>(0, vocab - 1)(rng))] = 60.0f;
    SamplingParams p;
    p.temperature = std::array<float, 3>{0.3f, 0.7f, 1.3f}[(trial / 7) % 3];
    p.top_k = std::array<int, 5>{1, 5, 20, 64, 256}[(trial / 3) % 5];
    p.top_p = std::array<float, 3>{1.0f, 0.95f, 0.5f}[(trial / 5) % 3];
    p.min_p = std::array<float, 2>{0.0f, 0.05f}[(trial / 11) % 2];
    if (p.greedy()) p.top_k = 2;
    SamplerScratch a, b;
    for (double u : {0.0, 0.3, 0.77, 0.999, 1.0 - 0x1.0p-53}) {
      int64_t valid = 0;
      const auto superset = candidate_superset(logits, p, std::uniform_int_distribution<int>(0, 40)(rng), rng, valid);
      const int32_t want = sample_token(logits, p, {}, 0, u, a);
      const RowCandidates set{superset.x, superset.ids, valid, p.top_k, std::nan("")};  // no total needed
      EXPECT_EQ(sample_from_candidates(set, p, u, vocab, b), want)
          << "vocab " << vocab << " kind " << kind << " T " << p.temperature << " top_k " << p.top_k << " top_p "
          << p.top_p << " min_p " << p.min_p << " u " << u;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1500);
}

// softmax_total is the definition's total: exp_det terms of x = logit / T against the row's largest x,
// summed in the tree over the valid ids (written out here with TreeSum directly).
TEST(Sampler, SoftmaxTotalIsTheTreeSumOfTheTerms) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int vocab = trial % 8 == 0 ? 151936 : std::uniform_int_distribution<int>(1, 9000)(rng);
    std::vector<float> logits(static_cast<size_t>(vocab));
    std::normal_distribution<float> normal(0.0f, std::array<float, 4>{0.5f, 3.0f, 30.0f, 300.0f}[trial % 4]);
    for (float& x : logits) {
      x = normal(rng);
      if (trial % 3 == 1 && std::uniform_int_distribution<int>(0, 9)(rng) == 0) x = -INFINITY;
      if (trial % 5 == 2 && std::uniform_int_distribution<int>(0, 99)(rng) == 0) x = std::nanf("");
    }
    const float t = std::array<float, 3>{0.3f, 1.0f, 1.7f}[trial % 3];
    float x_max = -INFINITY;
    for (float l : logits)
      if (l > -INFINITY) x_max = std::max(x_max, l / t);
    TreeSum want;
    for (int id = 0; id < vocab; ++id)
      if (logits[static_cast<size_t>(id)] > -INFINITY)
        want.add(id, exp_det(static_cast<double>(logits[static_cast<size_t>(id)] / t) - x_max));
    EXPECT_EQ(softmax_total(logits, t), want.total()) << "trial " << trial;
    EXPECT_EQ(softmax_total(logits, t, /*simd=*/false), want.total()) << "trial " << trial;
  }
  EXPECT_EQ(softmax_total(std::vector<float>(10, -INFINITY), 1.0f), 0.0);
  EXPECT_EQ(softmax_total(std::vector<float>(10, -INFINITY), 1.0f, false), 0.0);
}

// softmax_row_terms (four lanes at a time where the CPU has AVX2 and FMA, else one) writes exp_det's bits
// for every id and 0 for -inf and NaN, and returns the tree's total, on rows that reach every branch: d
// densely over (-800, 0] (the lanes' range ends at -708, exp_det's underflow at -745), x overflowing to
// ±inf, a +inf logit (x_max +inf: NaN differences), signed zeros, sizes that are not whole groups or lanes.
TEST(Sampler, RowTermsAreExpDetsBitsInEveryLane) {
  std::mt19937 rng(23);
  int checked = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int vocab = std::array<int, 6>{1, 3, 64, 67, 4099, 151936}[trial % 6];
    const float t = std::array<float, 4>{1.0f, 0.7f, 1e-3f, 2.5f}[trial / 6];
    std::uniform_real_distribution<float> spread(-800.0f, 0.0f);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (size_t i = 0; i < logits.size(); ++i) {
      logits[i] = spread(rng) * t;  // x = logit / t spans d over (-800, 0]
      const int kind = std::uniform_int_distribution<int>(0, 39)(rng);
      if (kind == 0) logits[i] = -INFINITY;
      if (kind == 1) logits[i] = std::nanf("");
      if (kind == 2) logits[i] = i % 2 ? 0.0f : -0.0f;
      if (kind == 3 && t < 0.01f) logits[i] = -3e38f;  // x = -inf
    }
    if (trial % 5 == 4) logits[logits.size() / 2] = INFINITY;
    float x_max = -INFINITY;
    for (float l : logits)
      if (l > -INFINITY) x_max = std::max(x_max, l / t);
    TreeSum want_total;
    std::vector<double> want(logits.size(), 0.0);
    for (size_t id = 0; id < logits.size(); ++id) {
      if (!(logits[id] > -INFINITY)) continue;
      want[id] = exp_det(static_cast<double>(logits[id] / t) - x_max);
      want_total.add(static_cast<int64_t>(id), want[id]);
    }
    const double total = want_total.total();
    for (bool simd : {true, false}) {
      std::vector<double> got(logits.size(), -1.0);
      const double got_total = softmax_row_terms(logits, t, x_max, got.data(), simd);
      EXPECT_EQ(std::bit_cast<uint64_t>(got_total), std::bit_cast<uint64_t>(total)) << "trial " << trial << " simd " << simd;
      EXPECT_EQ(std::bit_cast<uint64_t>(softmax_row_terms(logits, t, x_max, nullptr, simd)), std::bit_cast<uint64_t>(total));
      for (size_t id = 0; id < logits.size(); ++id)
        ASSERT_EQ(std::bit_cast<uint64_t>(got[id]), std::bit_cast<uint64_t>(want[id]))
            << "trial " << trial << " simd " << simd << " id " << id << " logit " << logits[id];
      EXPECT_EQ(std::bit_cast<uint64_t>(softmax_total(logits, t, simd)), std::bit_cast<uint64_t>(total)) << "trial " << trial;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48);
}

// Without top_k, sample_from_candidates on a superset of the row's best 256 and the row's total gives
// sample_token's token or -1 (the draw reaches past them) — never another token; peaked rows (what a
// trained model writes) decide from the set (for u up to 0.999: u within 1e-10 of 1 reaches the tail),
// flat ones with top_p 0.95 cannot.
TEST(Sampler, FromTheBestCandidatesAndTheTotalWithoutTopK) {
  std::mt19937 rng(9);
  int checked = 0, decided = 0, peaked = 0, peaked_decided = 0;
  for (int trial = 0; trial < 240; ++trial) {
    const int vocab = trial % 40 == 0 ? 151936 : std::uniform_int_distribution<int>(1, 4000)(rng);
    const int kind = trial % 6;  // RowKinds, and 4: one token at 1e30, 5: peaked
    const RowKind kinds[] = {RowKind::kSmooth, RowKind::kTies, RowKind::kSomeNegInf,
                             RowKind::kFewValid, RowKind::kSmooth, RowKind::kSmooth};
    std::vector<float> logits = random_row(vocab, kinds[kind], std::array<float, 3>{0.5f, 3.0f, 20.0f}[trial % 3], rng);
    if (kind == 4) logits[static_cast<size_t>(std::uniform_int_distribution<int>(0, vocab - 1)(rng))] = 1e30f;
    if (kind == 5)  // peaked: a few tokens far above the rest
      for (int i = 0; i < 5; ++i) logits[static_cast<size_t>(std::uniform_int_distribution<int>(0, vocab - 1)(rng))] += 25.0f;
    SamplingParams p;
    p.temperature = std::array<float, 3>{0.3f, 0.7f, 1.3f}[(trial / 6) % 3];
    p.top_k = (trial / 18) % 4 == 3 ? 100000 : 0;  // top_k past the set: kept only when it covers the row
    p.top_p = std::array<float, 3>{1.0f, 0.95f, 0.5f}[(trial / 5) % 3];
    p.min_p = std::array<float, 2>{0.0f, 0.05f}[(trial / 7) % 2];
    SamplerScratch a, b;
    const int64_t best = 256;
    for (double u : {0.0, 0.3, 0.77, 0.999, 1.0 - 0x1.0p-53}) {
      SamplingParams q = p;
      q.top_k = best;  // candidate_superset's size
      int64_t valid = 0;
      const auto superset = candidate_superset(logits, q, std::uniform_int_distribution<int>(0, 40)(rng), rng, valid);
      const RowCandidates set{superset.x, superset.ids, valid, best, softmax_total(logits, p.temperature)};
      const int32_t want = sample_token(logits, p, {}, 0, u, a);
      const int32_t got = sample_from_candidates(set, p, u, vocab, b);
      if (got >= 0) {
        EXPECT_EQ(got, want) << "vocab " << vocab << " kind " << kind << " T " << p.temperature << " top_p " << p.top_p
                             << " min_p " << p.min_p << " u " << u;
      }
      if (valid <= best) {
        EXPECT_GE(got, 0) << "every candidate is in the set";
      }
      if (p.top_k > 0 && p.top_k < valid) {
        EXPECT_EQ(got, -1) << "top_k past the set's best";
      }
      ++checked;
      decided += got >= 0;
      if (kind == 5 && trial % 3 != 2 && p.top_k == 0 && p.temperature < 1.0f && u <= 0.999) {
        ++peaked;
        peaked_decided += got >= 0;
      }
    }
  }
  EXPECT_EQ(checked, 1200);
  EXPECT_EQ(peaked_decided, peaked);
  EXPECT_GT(decided, checked / 2);
  EXPECT_LT(decided, checked);  // some draws reach past the best 256 (flat rows)
}

TEST(StopStrings, MatchAcrossPiecesAndHoldBackPrefixes) {
  StopStrings s({"</end>", "STOP"});
  EXPECT_EQ(s.feed("hello </"), 6u);  // "</" may start "</end>": held back
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.feed("e"), 6u);
  EXPECT_EQ(s.feed("nd> more"), 6u);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), "</end>");
  StopStrings t({"STOP"});
  EXPECT_EQ(t.feed("no stop here ST"), 13u);
  EXPECT_EQ(t.feed("ART"), 18u);  // "START" is not a stop: released
  EXPECT_FALSE(t.stopped());
  StopStrings none({});
  EXPECT_EQ(none.feed("abc"), 3u);
}

}  // namespace
}  // namespace helium
