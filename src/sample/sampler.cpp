#include "sample/sampler.h"

#include <algorithm>
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

  // Candidates ordered by logit desc, id asc: a total order, so the result never depends on sort details.
  auto& c = s.candidates;
  c.clear();
  for (int32_t t = 0; t < vocab; ++t)
    if (logits[t] > -std::numeric_limits<float>::infinity()) c.emplace_back(logits[t] / p.temperature, t);
  if (c.empty()) return 0;
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t keep = c.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(c.begin(), c.begin() + keep, c.end(), better);
    c.resize(keep);
  } else {
    std::sort(c.begin(), c.end(), better);
  }
  // Softmax in double over the kept candidates.
  const double max_logit = c[0].first;
  std::vector<double> probs(c.size());
  double total = 0;
  for (size_t i = 0; i < c.size(); ++i) total += probs[i] = std::exp(static_cast<double>(c[i].first) - max_logit);
  for (double& q : probs) q /= total;
  if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one token)
    double cum = 0;
    size_t n = 0;
    while (n < probs.size()) {
      cum += probs[n++];
      if (cum >= p.top_p) break;
    }
    keep = n;
  } else {
    keep = probs.size();
  }
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * probs[0];
    size_t n = 1;
    while (n < keep && probs[n] >= floor) ++n;
    keep = n;
  }
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += probs[i];
  double target = u * mass, cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += probs[i];
    if (target < cum) return c[i].second;
  }
  return c[keep - 1].second;
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
