// backend/cuda/switches.cpp — the backend's switches read from the environment (switches.h).
#include "backend/cuda/switches.h"

#include <cstdlib>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>

namespace helium::cuda {

Status read_switch(const char* variable, std::string_view on, std::string_view off, bool& flag) {
  const char* env = std::getenv(variable);
  if (env == nullptr || *env == '\0') return Status::ok();
  const std::string_view v(env);
  if (v != on && v != off)
    return Status::error(std::string(variable) + " must be '" + std::string(on) + "' or '" + std::string(off) +
                         "', not '" + std::string(v) + "'");
  flag = v == on;
  return Status::ok();
}

Status read_integer(const char* variable, const char* what, long lo, long hi, long& value) {
  const char* env = std::getenv(variable);
  if (env == nullptr || *env == '\0') return Status::ok();
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || v < lo || v > hi)
    return Status::error(std::string(variable) + " must be " + what + ", " + std::to_string(lo) + ".." +
                         std::to_string(hi) + ", not '" + env + "'");
  value = v;
  return Status::ok();
}

namespace {

// One of a list of spellings; unset or empty leaves `value` as it is.
Status read_choice(const char* variable, std::span<const std::pair<std::string_view, int>> choices,
                   const char* listed, int& value) {
  const char* env = std::getenv(variable);
  if (env == nullptr || *env == '\0') return Status::ok();
  const std::string_view v(env);
  for (const auto& [name, choice] : choices) {
    if (v == name) {
      value = choice;
      return Status::ok();
    }
  }
  return Status::error(std::string(variable) + " must be " + listed + ", not '" + std::string(v) + "'");
}
Status read_choice(const char* variable, std::initializer_list<std::pair<std::string_view, int>> choices,
                   const char* listed, int& value) {
  return read_choice(variable, std::span(choices.begin(), choices.size()), listed, value);
}

}  // namespace

bool is_oproj_stages_choice(int stages) {
  for (const auto& [name, choice] : kOprojStagesChoices)
    if (choice == stages) return true;
  return false;
}

Status read_matmul_switches(Context& ctx) {
  HELIUM_RETURN_IF_ERROR(read_choice("HELIUM_CUDA_MMA_ONE_ROW", {{"0", 0}, {"6", 6}, {"7", 7}, {"8", 8}},
                                     "0, 6, 7 or 8", ctx.mma_one_row_stages));
  HELIUM_RETURN_IF_ERROR(read_choice("HELIUM_CUDA_OPROJ_STAGES", kOprojStagesChoices, kOprojStagesListed,
                                     ctx.oproj_stages));
  long blocks = ctx.mma_one_row_blocks;
  HELIUM_RETURN_IF_ERROR(read_integer("HELIUM_CUDA_MMA_BLOCKS", "a block count", 1, 4, blocks));
  ctx.mma_one_row_blocks = static_cast<int>(blocks);
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_MMA_SPREAD", "on", "off", ctx.mma_spread));
  HELIUM_RETURN_IF_ERROR(read_switch("HELIUM_CUDA_MMA_SPREAD_ROWS", "on", "off", ctx.mma_spread_rows));
  HELIUM_RETURN_IF_ERROR(read_choice("HELIUM_CUDA_MMA_XSHARED",
                                     {{"off", 0},
                                      {"tuned", Context::kXSharedTuned},
                                      {"wide", Context::kXSharedWide},
                                      {"auto", -1},
                                      {"1", 1},
                                      {"2", 2},
                                      {"4", 4}},
                                     "off, tuned, wide, auto, 1, 2 or 4", ctx.mma_x_shared));
  HELIUM_RETURN_IF_ERROR(read_choice("HELIUM_CUDA_MMA_XSHARED_STAGES",
                                     {{"0", 0}, {"4", 4}, {"8", 8}, {"12", 12}, {"16", 16}}, "0, 4, 8, 12 or 16",
                                     ctx.mma_x_shared_stages));
  return read_choice("HELIUM_CUDA_MMA_XSHARED_GROUPS", {{"auto", 0}, {"1", 1}, {"2", 2}, {"4", 4}},
                     "auto, 1, 2 or 4", ctx.mma_x_shared_groups);
}

}  // namespace helium::cuda
