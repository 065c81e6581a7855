// engine/memory_plan.h — where a model's bytes will live before any of them is loaded: weights (by
// dtype), the KV cache of the chosen context (full-attention layers only), recurrent state (per sequence,
// with its speculation snapshots), activations, the drafter, and the backend's scratch, placed on the GPU
// or the host, with MoE experts offloaded to host RAM (or streamed from disk) when asked. A model that does
// not fit gets a refusal that states the numbers and the flags that would make it fit.
//
// The plan works from shape facts alone (a catalog entry, or a local config.json through
// model_shape_from_config), so `helium info --model 35b` plans a model that is not downloaded. Where the
// engine's own sizes are known they are reproduced exactly: the KV cache (KvCache: whole pages plus 64
// tree-scratch slots), the dense transformer's activation buffers, and the CUDA backend's reservations
// (attention partials for 128 heads × 256 dims, the bf16 prefill copy, the cuBLASLt workspace), as
// sized by engine.cpp today. For families helium does not implement yet, activations are an estimate and
// the plan says so.
//
// Owns: the plan arithmetic, the refusal text, byte-size parsing. Must not: allocate, load, or query devices.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "hub/catalog.h"

namespace helium {

enum class Placement { Gpu, Host, Disk };

struct MemoryPlanOptions {
  int64_t context = 32768;  // KV positions per sequence (already resolved, > 0)
  int sequences = 1;        // sequences served at once: KV and recurrent state scale with it
  bool gpu = true;          // false: a CPU plan (all on the host; weights memory-mapped)
  std::string device_name = "H200";
  int64_t gpu_bytes = 141'000'000'000;  // an H200's 141 GB, the default when no GPU is named; 0 = unknown
                                        // (everything is placed on the GPU and nothing is checked)
  int64_t host_bytes = 0;               // host RAM; 0 = unknown (host placement is then not checked)
  std::string quantization;             // weight format to plan for; empty = the checkpoint's
  int kv_element_bytes = 0;             // 0: the engine's default, BF16 (2) on the GPU, F32 (4) on the CPU
  int rows_per_forward = 0;             // 0: the engine's default, 4096 on the GPU, 256 on the CPU
  bool offload_experts = false;         // MoE experts that do not fit on the GPU go to host RAM (then disk)
  bool drafter = true;                  // plan the recommended drafter
  int speculative_tokens = 4;           // draft tokens per step: each needs a recurrent-state snapshot
  int64_t gpu_reserved_bytes = int64_t{1} << 30;   // CUDA context, allocator slack
  int64_t host_reserved_bytes = int64_t{4} << 30;  // the OS and everything else on the host
};

// The model to plan. Weights and activations are computed from `shape` unless measured values are given
// (a loaded checkpoint's weight bytes and its planned activation buffers are exact).
struct PlanModel {
  std::string name;
  ModelShape shape;
  std::string quantization = "bf16";  // the checkpoint's weight format
  std::optional<int64_t> measured_weight_bytes;
  std::optional<int64_t> measured_activation_bytes;
  bool implemented = false;  // helium has this family: activations are the engine's, not an estimate
  std::string drafter;       // "", "mtp", or a drafter model's name
  std::optional<ModelShape> drafter_shape;  // for a drafter model
  std::string drafter_quantization = "bf16";
};

struct PlanItem {
  std::string what;
  int64_t bytes = 0;
  Placement where = Placement::Gpu;
  std::string detail;
};

struct MemoryPlan {
  std::string model;
  std::string device;  // "H200 (141.0 GB)" or "CPU"
  bool gpu = true;
  int64_t context = 0;
  int sequences = 1;
  std::string quantization;
  int kv_element_bytes = 0;
  int rows_per_forward = 0;
  std::vector<PlanItem> items;

  // The components, for callers and tests.
  int64_t weight_bytes = 0;        // all weights of the model (experts included), at the planned format
  int64_t expert_bytes = 0;        // of which routed experts
  int64_t kv_bytes_per_token = 0;  // all full-attention layers, one sequence
  int64_t kv_bytes = 0;
  int64_t recurrent_bytes = 0;
  int64_t activation_bytes = 0;
  bool activations_estimated = false;
  int64_t drafter_bytes = 0;
  int64_t backend_scratch_bytes = 0;  // CUDA reservations (0 on the CPU)
  int64_t experts_on_gpu = 0, experts_on_host = 0, experts_on_disk = 0;

  int64_t gpu_total = 0, host_total = 0, disk_total = 0;
  int64_t gpu_budget = 0, host_budget = 0;  // 0 host budget: not checked
  bool fits = true;
  std::string refusal;             // when !fits: the numbers, and the flags that would make it fit
  std::vector<std::string> notes;  // warnings that do not stop it (e.g. experts streamed from disk)
};

MemoryPlan plan_memory(const PlanModel& model, const MemoryPlanOptions& options);

// The plan as a table, then "fits" with the room left, or the refusal.
void print_memory_plan(FILE* out, const MemoryPlan& plan);

// Shape facts from a (text) config.json, for the families whose keys are known: llama, qwen2, qwen3,
// mistral (dense), qwen3_moe, qwen3_next, qwen3_5(_text), qwen3_5_moe(_text), nemotron_h, llada2_moe.
// The error names the missing or unknown key.
Result<ModelShape> model_shape_from_config(const nlohmann::json& config, const std::string& origin);

// The activation buffers DenseTransformer plans (models/dense_transformer.cpp), byte for byte: the
// per-row activations, logits for up to 64 rows, the RoPE table, the row metadata and the block tables.
int64_t dense_activation_bytes(const ModelShape& shape, int64_t rows, int64_t context, int rope_dims);
// KV bytes of KvCache::create for `positions` positions: whole 16-position pages plus 64 scratch slots,
// and its small slot-move table.
int64_t kv_cache_bytes(const ModelShape& shape, int64_t positions, int element_bytes);

// "141GB", "141 GB", "80GiB", "1.5TB", "512MiB", "123456": decimal units (kB, MB, GB, TB) and binary
// ones (KiB, MiB, GiB, TiB), case-insensitive; "G"/"M"/"K"/"T" alone are read as GB/MB/kB/TB.
Result<int64_t> parse_byte_size(std::string_view text);
// Physical RAM of this machine (0 when unknown).
int64_t host_memory_bytes();

class Engine;
// The plan of a loaded engine, printed by `helium run` at start-up: the checkpoint's shape and weight
// bytes, the engine's context, rows per forward and KV dtype. GPU memory 0 = not known (not checked).
Result<MemoryPlan> plan_for_engine(const Engine& engine, const std::string& name, int64_t gpu_bytes = 0,
                                   int64_t host_bytes = 0);

}  // namespace helium
