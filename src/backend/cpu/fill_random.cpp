// backend/cpu/fill_random.cpp — deterministic pseudo-random fill (dummy weights): element i gets
// offset + scale * u with u uniform in [-1, 1) from splitmix64(seed ^ splitmix64(i)); the CUDA backend's
// fill_random.cu computes the same values.
#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {
namespace {

uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void fill_random(const CpuContext& ctx, const Tensor& t, uint64_t seed, float offset, float scale) {
  const OpDescription op("fill_random", {{"t", &t}});
  HELIUM_CHECK(op, t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16) << "float tensor needed";
  parallel_for(ctx.pool, t.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t r = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(i)));
      const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
      const float v = offset + (2.0f * u - 1.0f) * scale;
      if (t.dtype == DType::BF16) t.as<uint16_t>()[i] = f32_to_bf16(v);
      else if (t.dtype == DType::F16) t.as<uint16_t>()[i] = f32_to_f16(v);
      else t.as<float>()[i] = v;
    }
  });
}

}  // namespace helium::cpu
