// backend/cuda/switches.h — the backend's switches read from the environment (HELIUM_CUDA_*), one parser
// for CudaBackend::create, the CUDA tests and the benchmarks, so that each refuses a malformed value with
// the same message and sets the Context the same way.
#pragma once

#include <string_view>
#include <utility>

#include "backend/cuda/cuda_ops.cuh"
#include "core/status.h"

namespace helium::cuda {

// A two-way switch: `on` sets `flag`, `off` clears it, unset or empty leaves it as it is (the default);
// anything else is refused by name.
Status read_switch(const char* variable, std::string_view on, std::string_view off, bool& flag);

// A whole number in [lo, hi]; unset or empty leaves `value` as it is. `what` names it in the error
// ("a whole number of MiB").
Status read_integer(const char* variable, const char* what, long lo, long hi, long& value);

// o_proj's ring depths after decode attention that HELIUM_CUDA_OPROJ_STAGES takes (Context::oproj_stages),
// spelled out for its error and for the attention tuning cache's reader (read_attention_tuning).
inline constexpr std::pair<std::string_view, int> kOprojStagesChoices[] = {
    {"0", 0}, {"10", 10}, {"12", 12}, {"16", 16}};
inline constexpr const char* kOprojStagesListed = "0, 10, 12 or 16";
// Whether `stages` is one of them.
bool is_oproj_stages_choice(int stages);

// The tensor-core decode matmul's switches: HELIUM_CUDA_MMA_ONE_ROW (0|6|7|8), HELIUM_CUDA_OPROJ_STAGES
// (0|10|12|16), HELIUM_CUDA_MMA_BLOCKS (1..4),
// HELIUM_CUDA_MMA_SPREAD and HELIUM_CUDA_MMA_SPREAD_ROWS (on|off), HELIUM_CUDA_MMA_XSHARED
// (off|tuned|wide|auto|1|2|4), HELIUM_CUDA_MMA_XSHARED_STAGES (0|4|8|12|16) and HELIUM_CUDA_MMA_XSHARED_GROUPS
// (auto|1|2|4). What each does: the fields of Context they set.
Status read_matmul_switches(Context& ctx);

}  // namespace helium::cuda
