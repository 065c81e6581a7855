// backend/cuda/tune.h — the start-up tuner's choice among timed decode-matmul configurations (tune.cpp),
// apart from the timing so that the rule is tested without a GPU.
#pragma once

#include <span>
#include <utility>

#include "backend/cuda/cuda_ops.cuh"

namespace helium::cuda {

// Among the timed configurations (µs each) within kTuneTieFraction of the fastest: the largest weight ring
// up to kTuneMaxRingBytes, then the most warps per block, then the fastest. Rings past the cap are never
// taken. `fallback` when nothing qualifies. The measurements behind each step are in tune.cpp.
inline constexpr float kTuneTieFraction = 0.03f;
inline constexpr int64_t kTuneMaxRingBytes = 64 * 1024;
MatmulDecodeConfig choose_decode_config(std::span<const std::pair<MatmulDecodeConfig, float>> timed, DType w_dtype,
                                        const MatmulDecodeConfig& fallback, float* chosen_us = nullptr);

// One shape timed at `groups` row groups of 16 (16 · groups rows) on the default tensor-core kernel and on the
// x-shared one (µs each).
struct XSharedTiming {
  int groups = 0;
  float default_us = 0, x_shared_us = 0;
};
// MatmulDecodeShapeConfig::x_shared_from_groups from such timings: the fewest row groups g such that the
// x-shared kernel beat the default by more than kTuneTieFraction at g and at every larger count timed;
// kXSharedNever when it did not at the largest (or nothing was timed).
int choose_x_shared_from_groups(std::span<const XSharedTiming> timed);

}  // namespace helium::cuda
