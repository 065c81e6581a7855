#include "sample/sampler.h"

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

using Candidate = std::pair<float, int32_t>;

// (x desc, id asc), the candidates' total order.
bool better(const Candidate& a, const Candidate& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; }

// A key whose ascending order is x's descending order, equal for +0 and -0 (they compare equal).
uint32_t descending_key(float x) {
  if (x == 0.0f) x = 0.0f;
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending in x
  return ~u;
}

// Sorts c (built in increasing id) into the candidate order: a stable LSD radix sort on descending_key,
// three passes of 11 bits, so equal values keep their increasing ids — the order std::sort with `better`
// gives, in linear time.
void sort_candidates(std::vector<Candidate>& c, std::vector<Candidate>& tmp) {
  if (c.size() < 256) {
    std::sort(c.begin(), c.end(), better);
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

// The steps after the candidate list (see sample_token): c in increasing id, all candidates or, when
// `truncated`, the prefix of their order that the cut kept. Returns -1 when the answer depends on what
// was cut.
int32_t pick_sorted(std::vector<Candidate>& c, const SamplingParams& p, double u, bool truncated,
                    SamplerScratch& s) {
  size_t keep = c.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep), c.end(), better);
    c.resize(keep);
    truncated = false;  // the first top_k of the prefix are the first top_k of the whole order
  } else {
    sort_candidates(c, s.sort_buffer);
  }
  // Softmax in double over the kept candidates: e[i] = exp(x_i - x_max), summed in order; a probability is
  // e[i] / total, divided where it is used (only a prefix is, for most settings).
  const double max_logit = c[0].first;
  std::vector<double>& e = s.probs;
  e.resize(c.size());
  double total = 0;
  for (size_t i = 0; i < c.size(); ++i) total += e[i] = std::exp(static_cast<double>(c[i].first) - max_logit);
  auto prob = [&](size_t i) { return e[i] / total; };
  if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one token)
    double cum = 0;
    size_t n = 0;
    while (n < e.size()) {
      cum += prob(n++);
      if (cum >= p.top_p) break;
    }
    if (cum < p.top_p && truncated) return -1;
    keep = n;
  } else {
    keep = e.size();
  }
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * prob(0);
    size_t n = 1;
    while (n < keep && prob(n) >= floor) ++n;
    keep = n;
  }
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += prob(i);
  double target = u * mass, cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += prob(i);
    if (target < cum) return c[i].second;
  }
  if (truncated && keep == c.size()) return -1;  // the last kept candidate may lie past the cut
  return c[keep - 1].second;
}

}  // namespace

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

  // The definition (what every path returns): candidates are the tokens with logit > -inf, valued
  // x = logit / temperature and ordered by (x desc, id asc), a total order. top_k keeps the first k.
  // Probabilities are exp(x - x_max) in double, summed in that order and divided by the sum; top_p keeps
  // the shortest prefix whose mass reaches top_p, min_p the prefix with p >= min_p · p_max; the token is
  // the first whose running mass exceeds u times the kept mass (the last kept one if none does).
  //
  // Sorting the whole vocabulary for that took 16-18 ms per token on a 152K vocabulary (this machine's
  // CPU), three times a GPU decode step. Candidates more than kNegligible below x_max cannot change any
  // sum: each adds exp(x - x_max) < 2^-57 to a sum that is at least 1 (the first term; for the running
  // masses of normalised probabilities, at least 1/2 by the time the prefix is that long), i.e. less than
  // half a unit in its last place, which rounds away. So the sort and the sums run over the candidates
  // within kNegligible of the top only, and the answer is the same bits; the one case that can reach past
  // them (no kept candidate crossed u · mass: u within 2^-53 of 1, or u · mass rounded up) recomputes over
  // the whole list.
  auto& c = s.candidates;
  c.clear();
  float x_max = -std::numeric_limits<float>::infinity();
  int32_t valid = 0;
  for (int32_t t = 0; t < vocab; ++t) {
    if (!(logits[t] > -std::numeric_limits<float>::infinity())) continue;  // -inf and NaN
    logits[t] /= p.temperature;
    x_max = std::max(x_max, logits[t]);
    ++valid;
  }
  if (valid == 0) return 0;
  const bool finite_max = std::isfinite(x_max);  // +inf: the sums are NaN; the full list decides
  constexpr double kNegligible = 40.0;           // exp(-40) = 4.2e-18 < 2^-57
  for (int32_t t = 0; t < vocab; ++t)
    if (logits[t] > -std::numeric_limits<float>::infinity() &&
        (!finite_max || static_cast<double>(logits[t]) - x_max >= -kNegligible))
      c.emplace_back(logits[t], t);
  const bool truncated = static_cast<int32_t>(c.size()) < valid;
  const int32_t token = pick_sorted(c, p, u, truncated, s);
  if (token >= 0) return token;
  c.clear();  // the rare case: the whole list
  for (int32_t t = 0; t < vocab; ++t)
    if (logits[t] > -std::numeric_limits<float>::infinity()) c.emplace_back(logits[t], t);
  return pick_sorted(c, p, u, /*truncated=*/false, s);
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
