// core/candidate_order.h — the rank order of sampling candidates, shared by the sampler (sample/) and the
// backends' candidate selection (Backend::select_candidates), which must agree on which candidates are a
// row's best top_k: x (logit / temperature) descending, then token id ascending.
#pragma once

#include <cstdint>
#include <bit>
#include <span>
#include <utility>
#include <vector>

namespace helium {

using ScoredToken = std::pair<float, int32_t>;  // (x, token id)

// A strict weak order for sorting (x never NaN: a NaN logit is refused before sampling).
inline bool ranks_before(const ScoredToken& a, const ScoredToken& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

// A key whose ascending order is x's descending order, equal for +0 and -0 (they compare equal). Without
// branches: a sign that varies from one logit to the next costs a misprediction a candidate.
inline uint32_t descending_key(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x + 0.0f);  // -0 + +0 is +0; every other x is itself
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u;
  return ~(u ^ flip);  // u ^ flip ascends in x: negatives' bits inverted, positives' sign bit set
}

// The first k of c in the rank order, ranked, into `best` (what std::partial_sort_copy with ranks_before
// writes): the candidates in the buckets of descending_key's top bits that hold the best k, found by one
// counting pass, and only those sorted — linear in c where a heap of k is c · log k.
void rank_best(std::span<const ScoredToken> c, int64_t k, std::vector<ScoredToken>& best);

}  // namespace helium
