#include "core/softmax_terms.h"

#include <algorithm>
#include <limits>

namespace helium {

double softmax_total(std::span<const float> logits, float temperature) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float x_max = kNegInf;
  for (float l : logits)
    if (l > kNegInf) x_max = std::max(x_max, l / temperature);
  TreeSum sum;
  with_fma([&]() __attribute__((always_inline)) {
    for (size_t t = 0; t < logits.size(); ++t)
      if (logits[t] > kNegInf) sum.add(static_cast<int64_t>(t), exp_det(static_cast<double>(logits[t] / temperature) - x_max));
  });
  return sum.total();
}

}  // namespace helium
