// backend/cpu/rope.cpp — rotary position embedding, NeoX / rotate_half style, in place.
// For each row at position p and each i < rot_dim/2: angle = p · inv_freq[i], rounded to f32 as the
// Hugging Face reference computes it (at p = 32K that rounding moves the angle by up to ~2e-3 rad, so a
// reference in double would disagree with every checkpoint's goldens); cos and sin of that f32 angle are
// taken in double and rounded, then multiplied by attention_scaling. Each head's pair (x[i], x[i + half])
// becomes (x[i]·c - x[i+half]·s, x[i+half]·c + x[i]·s); dims >= rot_dim pass unchanged.
// Elementwise with no reduction, so one scalar kernel serves every ISA; the cost is one cos/sin pair per
// row and frequency, shared by all heads.
#include <algorithm>
#include <cmath>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

void rope(const CpuContext& ctx, const Tensor& x, int heads, const Tensor& positions, const Tensor& inv_freq,
          const RopeParams& params) {
  const OpDescription op("rope", {{"x", &x}, {"positions", &positions}, {"inv_freq", &inv_freq}});
  HELIUM_CHECK(op, x.data != nullptr && positions.data != nullptr && inv_freq.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, x.dtype == DType::F32 && positions.dtype == DType::I32 && inv_freq.dtype == DType::F32)
      << "x F32, positions I32, inv_freq F32";
  HELIUM_CHECK(op, heads > 0 && params.head_dim > 0 && params.rot_dim > 0 && params.rot_dim % 2 == 0 &&
                       params.rot_dim <= params.head_dim)
      << "heads " << heads << ", head_dim " << params.head_dim << ", rot_dim " << params.rot_dim;
  HELIUM_CHECK(op, inv_freq.numel() == params.rot_dim / 2) << "inv_freq must hold rot_dim / 2 values";
  const int64_t rows = positions.numel(), row_elements = static_cast<int64_t>(heads) * params.head_dim;
  HELIUM_CHECK(op, x.rank >= 1 && x.dim(0) == rows && x.numel() == rows * row_elements)
      << "x must be (rows, heads * head_dim) with rows = positions";

  const int64_t half = params.rot_dim / 2, head_dim = params.head_dim;
  const int32_t* pos = positions.as<int32_t>();
  const float* freq = inv_freq.as<float>();
  parallel_for(ctx.pool, rows, std::max<int64_t>(1, 8192 / row_elements), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = x.as<float>() + r * row_elements;
      const float position = static_cast<float>(pos[r]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = position * freq[i];
        const float c = static_cast<float>(std::cos(static_cast<double>(angle))) * params.attention_scaling;
        const float s = static_cast<float>(std::sin(static_cast<double>(angle))) * params.attention_scaling;
        for (int64_t h = 0; h < heads; ++h) {
          float* head = row + h * head_dim;
          const float x1 = head[i], x2 = head[i + half];
          head[i] = x1 * c - x2 * s;
          head[i + half] = x2 * c + x1 * s;
        }
      }
    }
  });
}

}  // namespace helium::cpu
