#include "core/candidate_order.h"

#include <algorithm>

namespace helium {

void rank_best(std::span<const ScoredToken> c, int64_t k, std::vector<ScoredToken>& best) {
  const auto size = static_cast<int64_t>(c.size());
  k = std::clamp<int64_t>(k, 0, size);
  best.clear();
  if (k == 0) return;
  constexpr int kBits = 12;  // buckets of descending_key's top bits: sign, exponent, three of the mantissa
  constexpr int kShift = 32 - kBits;
  if (size < 2048 || k * 4 > size) {  // few, or most of c: a heap of k
    best.resize(static_cast<size_t>(k));
    std::partial_sort_copy(c.begin(), c.end(), best.begin(), best.end(), ranks_before);
    return;
  }
  // Every candidate of a lower bucket ranks before every candidate of a higher one (a lower key is a larger
  // x), so the best k lie in the buckets up to the first one where the running count reaches k.
  std::vector<uint32_t> count(size_t{1} << kBits, 0);
  for (const ScoredToken& e : c) ++count[descending_key(e.first) >> kShift];
  uint32_t last = 0;
  for (int64_t seen = 0; (seen += count[last]) < k;) ++last;
  for (const ScoredToken& e : c)
    if ((descending_key(e.first) >> kShift) <= last) best.push_back(e);
  std::partial_sort(best.begin(), best.begin() + k, best.end(), ranks_before);
  best.resize(static_cast<size_t>(k));
}

}  // namespace helium
