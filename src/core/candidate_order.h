// core/candidate_order.h — the rank order of sampling candidates, shared by the sampler (sample/) and the
// backends' candidate selection (Backend::select_candidates), which must agree on which candidates are a
// row's best top_k: x (logit / temperature) descending, then token id ascending.
#pragma once

#include <cstdint>
#include <utility>

namespace helium {

using ScoredToken = std::pair<float, int32_t>;  // (x, token id)

// A strict weak order for sorting (x never NaN: a NaN logit is refused before sampling).
inline bool ranks_before(const ScoredToken& a, const ScoredToken& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace helium
