#include "sample/sampler.h"

#include "core/softmax_terms.h"
#include "core/candidate_order.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>

namespace helium {

std::string validate_sampling(const SamplingParams& p, int64_t vocab_size) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) return "temperature must be a finite number >= 0";
  if (p.top_k < 0) return "top_k must be >= 0";
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1]";
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) return "repetition_penalty must be > 0";
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty)) return "penalties must be finite";
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size) return "logit_bias token id " + std::to_string(id) + " is outside the vocabulary";
    if (!std::isfinite(bias)) return "logit_bias values must be finite";
  }
  return "";
}

namespace {

using Candidate = ScoredToken;
constexpr int64_t kRankFirst = 1024;  // candidates ranked before the draw looks for more

// Sorts c (built in increasing id) into the candidate order: a stable LSD radix sort on descending_key,
// three passes of 11 bits, so equal values keep their increasing ids — the order std::sort with `ranks_before`
// gives, in linear time.
void sort_candidates(std::vector<Candidate>& c, std::vector<Candidate>& tmp) {
  if (c.size() < 256) {
    std::sort(c.begin(), c.end(), ranks_before);
    return;
  }
  tmp.resize(c.size());
  for (int shift = 0; shift < 32; shift += 11) {
    size_t count[2049] = {};
    for (const Candidate& e : c) ++count[((descending_key(e.first) >> shift) & 2047u) + 1];
    for (int b = 0; b < 2048; ++b) count[b + 1] += count[b];
    for (const Candidate& e : c) tmp[count[(descending_key(e.first) >> shift) & 2047u]++] = e;
    c.swap(tmp);
  }
}

// Each candidate's softmax term exp_det(x - x_max) into term_of_id[id].
void softmax_terms(std::span<const Candidate> c, float x_max, double* term_of_id) {
  with_fma([&]() __attribute__((always_inline)) {
    for (const Candidate& e : c) term_of_id[e.second] = exp_det(static_cast<double>(e.first) - x_max);
  });
}

// The terms of the first n of the ranked candidates `r` summed in the total's tree (their ids sorted into
// `ids`, scratch).
double tree_sum_of_first(std::span<const Candidate> r, int64_t n, const double* term_of_id, std::vector<int32_t>& ids) {
  ids.clear();
  for (int64_t i = 0; i < n; ++i) ids.push_back(r[i].second);
  std::sort(ids.begin(), ids.end());
  TreeSum sum;
  for (int32_t id : ids) sum.add(id, term_of_id[id]);
  return sum.total();
}

// The draw from the kept candidates' best `c` (sorted, a prefix of `kept` candidates in the candidate order)
// given the softmax's x_max and total (see sample_token). Returns -1 when the prefix is too short to decide:
// the caller sorts more of the candidates and asks again.
// set_sum(n): the terms of the first n candidates summed in the total's tree.
template <class SetSum>
int32_t draw_from_prefix(std::span<const Candidate> c, int64_t kept, const double* term_of_id, double total,
                         const SamplingParams& p, double u, SetSum&& set_sum) {
  const auto len = static_cast<int64_t>(c.size());
  const bool whole = len == kept;
  auto prob = [&](int64_t i) { return term_of_id[c[i].second] / total; };
  int64_t n = kept;  // the drawing set: the first n candidates
  if (p.top_p < 1.0f) {  // the shortest prefix whose mass reaches top_p (at least one token)
    double cum = 0;
    int64_t i = 0;
    while (i < len) {
      cum += prob(i++);
      if (cum >= p.top_p) break;
    }
    if (cum >= p.top_p) n = i;
    else if (!whole) return -1;
  }
  if (p.min_p > 0.0f) {  // and of those, the ones with p >= min_p · p_max
    const double floor = p.min_p * prob(0);
    int64_t j = 1;
    while (j < n && j < len && prob(j) >= floor) ++j;
    if (j == len && j < n) return -1;  // the run may go on past the prefix
    n = j;
  }
  // The set's mass: 1 when nothing was cut, else its terms summed in the total's tree, over the total.
  double mass = 1.0;
  if (n < kept) mass = set_sum(n) / total;
  const double target = u * mass;
  double cum = 0;
  for (int64_t i = 0; i < std::min(n, len); ++i) {
    cum += prob(i);
    if (target < cum) return c[i].second;
  }
  if (n > len) return -1;  // the last of the set lies past the prefix
  return c[n - 1].second;
}

// The draw when the candidates' best `kept` are known, ranked, in c[0, kept) (top_k < valid, or every
// valid candidate): x_max is the first's x.
int32_t draw_ranked(std::span<const Candidate> c, const SamplingParams& p, double u, SamplerScratch& s,
                    int32_t vocab) {
  const float x_max = c[0].first;
  if (x_max == std::numeric_limits<float>::infinity()) return c[0].second;  // the lowest id at +inf
  s.term_of_id.resize(static_cast<size_t>(vocab));
  double* term_of_id = s.term_of_id.data();
  softmax_terms(c, x_max, term_of_id);
  const auto kept = static_cast<int64_t>(c.size());
  const double total = tree_sum_of_first(c, kept, term_of_id, s.ids);
  return draw_from_prefix(c, kept, term_of_id, total, p, u,
                          [&](int64_t n) { return tree_sum_of_first(c, n, term_of_id, s.ids); });
}

}  // namespace

int32_t sample_from_candidates(const RowCandidates& set, const SamplingParams& p, double u, int32_t vocab_size,
                               SamplerScratch& s) {
  auto& c = s.candidates;
  c.resize(std::min(set.x.size(), set.ids.size()));
  for (size_t i = 0; i < c.size(); ++i) c[i] = {set.x[i], set.ids[i]};
  if (c.empty() || set.valid <= 0) return 0;
  const int64_t size = static_cast<int64_t>(c.size());
  if (p.top_k > 0 && p.top_k <= set.best) {  // the kept candidates are all in the set
    const int64_t kept = std::min<int64_t>({p.top_k, set.valid, size});
    std::partial_sort(c.begin(), c.begin() + kept, c.end(), ranks_before);
    c.resize(static_cast<size_t>(kept));
    return draw_ranked(c, p, u, s, vocab_size);
  }
  if (p.top_k > 0 && p.top_k < set.valid) return -1;  // top_k reaches past the set's best
  // The whole row is kept: its best `ranked` candidates, ranked, and the row's total decide the draw as
  // far as they reach (the ranking and the terms are sample_token's; the total is the row's).
  const int64_t ranked = std::min<int64_t>({set.best, set.valid, size});
  std::partial_sort(c.begin(), c.begin() + ranked, c.end(), ranks_before);
  c.resize(static_cast<size_t>(ranked));
  const float x_max = c[0].first;
  if (x_max == std::numeric_limits<float>::infinity()) return c[0].second;  // the lowest id at +inf
  s.term_of_id.resize(static_cast<size_t>(vocab_size));
  double* term_of_id = s.term_of_id.data();
  softmax_terms(c, x_max, term_of_id);
  return draw_from_prefix(c, set.valid, term_of_id, set.total, p, u,
                          [&](int64_t n) { return tree_sum_of_first(c, n, term_of_id, s.ids); });
}

int32_t sample_token(std::span<const float> row, const SamplingParams& p, std::span<const int32_t> context,
                     size_t output_len, double u, SamplerScratch& s) {
  const int32_t vocab = static_cast<int32_t>(row.size());
  std::vector<float>& logits = s.logits;
  logits.assign(row.begin(), row.end());

  for (const auto& [id, bias] : p.logit_bias) logits[id] += bias;
  if (p.repetition_penalty != 1.0f) {
    // Each distinct token once, as Hugging Face's RepetitionPenaltyLogitsProcessor (gather/scatter).
    s.counts.assign(vocab, 0);
    for (int32_t t : context) {
      if (t < 0 || t >= vocab || s.counts[t]) continue;
      s.counts[t] = 1;
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    s.counts.assign(vocab, 0);
    for (int32_t t : context.last(std::min(output_len, context.size())))
      if (t >= 0 && t < vocab) s.counts[t]++;
    for (int32_t t = 0; t < vocab; ++t)
      if (s.counts[t] > 0) logits[t] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(s.counts[t]);
  }

  if (p.greedy()) {
    int32_t best = 0;
    for (int32_t t = 1; t < vocab; ++t)
      if (logits[t] > logits[best]) best = t;
    return best;
  }

  // Sampling (version 2 of the definition; one function for plain decoding and verification alike).
  // Candidates: the tokens with logit > -inf, valued x = logit / temperature (float) and ordered by
  // (x desc, id asc), a total order; top_k keeps the first k. Each kept candidate's term is
  // exp_det(x - x_max) in double, the total their sum in softmax_terms.h's tree (by id), a probability
  // term / total. top_p keeps the shortest prefix (in candidate order) whose running sum of probabilities
  // reaches top_p; min_p the prefix with p >= min_p · p_first; the drawing set's mass is 1 when nothing
  // was cut, else its terms summed in the tree over the total; the token is the first whose running
  // probability exceeds u · mass, the set's last if none does. Nothing but the total needs every
  // candidate, and the total needs no order: the candidates are ranked only as far as the draw looks
  // (the best kRankFirst, the rest when that is not enough), so a draw costs a pass over the vocabulary
  // and a small sort. A device sampler with the same two helpers gives the same tokens.
  auto& c = s.candidates;
  c.clear();
  float x_max = -std::numeric_limits<float>::infinity();
  for (int32_t t = 0; t < vocab; ++t) {
    if (!(logits[t] > -std::numeric_limits<float>::infinity())) continue;  // -inf and NaN
    const float x = logits[t] / p.temperature;
    c.emplace_back(x, t);
    x_max = std::max(x_max, x);
  }
  if (c.empty()) return 0;
  if (x_max == std::numeric_limits<float>::infinity()) {  // every finite term vanishes beside it
    for (const Candidate& e : c)
      if (e.first == x_max) return e.second;
  }
  const auto valid = static_cast<int64_t>(c.size());
  if (p.top_k > 0 && p.top_k < valid) {  // every kept candidate is ranked
    const int64_t kept = p.top_k;
    std::partial_sort(c.begin(), c.begin() + kept, c.end(), ranks_before);
    c.resize(static_cast<size_t>(kept));
    return draw_ranked(c, p, u, s, vocab);
  }
  s.term_of_id.resize(static_cast<size_t>(vocab));
  double* term_of_id = s.term_of_id.data();
  const double total = softmax_row_terms(logits, p.temperature, x_max, term_of_id);
  // The first n of the ranked `r` summed in the tree: a sort of their ids when they are few, else a pass
  // over the vocabulary taking the candidates ranked at or above the n-th (the same ids, the same order).
  auto set_sum = [&](std::span<const Candidate> r, int64_t n) {
    if (n <= kRankFirst) return tree_sum_of_first(r, n, term_of_id, s.ids);
    const Candidate last = r[n - 1];
    TreeSum in_set;
    for (int32_t t = 0; t < vocab; ++t) {
      if (!(logits[t] > -std::numeric_limits<float>::infinity())) continue;
      const Candidate e(logits[t] / p.temperature, t);
      if (!ranks_before(last, e)) in_set.add(t, term_of_id[t]);
    }
    return in_set.total();
  };
  if (valid > kRankFirst) {  // rank the best kRankFirst first
    auto& best = s.sort_buffer;
    rank_best(c, kRankFirst, best);
    const int32_t token =
        draw_from_prefix(best, valid, term_of_id, total, p, u, [&](int64_t n) { return set_sum(best, n); });
    if (token >= 0) return token;
  }
  sort_candidates(c, s.sort_buffer);  // c is still in increasing id, as the radix sort wants
  return draw_from_prefix(c, valid, term_of_id, total, p, u, [&](int64_t n) { return set_sum(c, n); });
}

size_t StopStrings::feed(std::string_view piece) {
  if (stopped_) return match_at_;
  const size_t old_size = text_.size();
  text_.append(piece);
  size_t best = std::string::npos;
  for (const auto& stop : stops_) {
    if (stop.empty()) continue;
    // Only a match that ends in the new text is new; start the search early enough to catch it.
    size_t from = old_size >= stop.size() - 1 ? old_size - (stop.size() - 1) : 0;
    size_t at = text_.find(stop, from);
    if (at != std::string::npos && at < best) {
      best = at;
      matched_ = stop;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    match_at_ = best;
    return best;
  }
  // Hold back the longest suffix that is a prefix of some stop string.
  size_t hold = 0;
  for (const auto& stop : stops_) {
    if (stop.empty()) continue;
    for (size_t len = std::min(stop.size() - 1, text_.size()); len > hold; --len) {
      if (text_.compare(text_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  return text_.size() - hold;
}

}  // namespace helium
