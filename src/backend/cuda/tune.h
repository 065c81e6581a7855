// backend/cuda/tune.h — the start-up tuner's choices among timed decode-matmul configurations and decode
// attention partition sizes, and the reading of its cache files (tune.cpp), apart from the timing so that
// the rules and the reader are tested without a GPU.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/attention_partitions.h"
#include "backend/cuda/cuda_ops.cuh"
#include "core/status.h"

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

// The shapes of a matmul tuning cache file (tune.cpp writes {"shapes": [{n, k, dtype, config, ...}]}), each
// checked: an error names the first damaged entry (a field missing or of the wrong type, an unknown dtype,
// a configuration matmul_decode_config_valid refuses, a row-group count out of 0..kXSharedNever), and the
// tuner then times the shapes again rather than trust any of the file.
Result<std::vector<MatmulDecodeShapeConfig>> read_matmul_tuning(const nlohmann::json& cache);

// Decode attention at `keys` keys (one row, every partition full) timed with partitions of partition_keys
// (64, 128, 256 or 512), µs a layer of the q/k/v projection, prologue, attention and o_proj (tune.cpp).
struct PartitionTiming {
  int keys = 0, partition_keys = 0;
  float us = 0;
};
// The partition tiers from such timings: at each key count timed, the fastest size unless the size `current`
// gives there was timed within kTuneTieFraction of it (the current tiers were measured in the decode graph,
// where a near-tie timed alone went the other way: attention_partitions.h), never smaller than the size
// chosen at fewer keys (partition_keys grows with the keys); a tier ends at the most keys timed that chose
// its size or a smaller one. Key counts with one size timed take it. Nothing timed: `current`.
PartitionTiers choose_partition_tiers(std::span<const PartitionTiming> timed, const PartitionTiers& current);

// o_proj's ring after decode attention (Context::oproj_stages: 0 = the one-row instance's own depth) timed
// in the same chain, with the chosen tiers, at the fewest keys timed: µs a layer at each depth.
struct OprojTiming {
  int stages = 0;
  float us = 0;
};
// Timings within this fraction of each other are a tie, which keeps the depth in force: on an H100 the
// deep ring gained 0.5% of a 1K step, on an H200 it lost 0.6% (docs/benchmarks.md, thirty-fifth and
// forty-fourth sessions): ~0.7 µs a layer either way, a few percent of this chain's layer.
inline constexpr float kOprojTieFraction = 0.005f;
// The depth from such timings: the fastest, unless `current` was timed within kOprojTieFraction of it.
// Nothing timed: current.
int choose_oproj_stages(std::span<const OprojTiming> timed, int current);

// An attention tuning cache file's choices: the partition tiers, and o_proj's ring depth after attention
// (-1 where the file has none: the tuner times it again unless HELIUM_CUDA_OPROJ_STAGES sets it).
struct AttentionTuning {
  PartitionTiers tiers;
  int oproj_stages = -1;
};
// The choices of an attention tuning cache file ({"tiers": {small_end, medium_end, large_end},
// "oproj_stages": n, ...}): the tiers checked as HELIUM_CUDA_ATTN_PARTITIONS's value is (0 <= small_end <=
// medium_end <= large_end <= 2^30) and that a row of at most max_context keys gets at most max_partitions
// partitions (the scratch the backend reserved); the depth, where present, one HELIUM_CUDA_OPROJ_STAGES
// takes (0, 10, 12 or 16).
Result<AttentionTuning> read_attention_tuning(const nlohmann::json& cache, int64_t max_context,
                                              int64_t max_partitions);

}  // namespace helium::cuda
