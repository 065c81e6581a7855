// engine/memory_plan.cpp — the memory plan (see memory_plan.h).
#include "engine/memory_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "backend/cuda/attention_partitions.h"
#include "backend/cuda/matmul_scratch.h"
#include "engine/engine.h"
#include "hub/progress.h"

namespace helium {
namespace {

// Sizes the engine and the CUDA backend use today (engine.cpp, kv/kv_cache.cpp, backend/cuda/*.cu).
constexpr int64_t kKvPageSize = 16;      // KvCache positions per page
constexpr int64_t kKvScratchSlots = 64;  // KvCache tree-scratch slots (kMaxTreeRows)
constexpr int64_t kMaxLogitRows = 64;    // DenseTransformer logit rows per forward
constexpr int64_t kMaxDecodeRows = 64;   // CUDA decode-path rows
constexpr int64_t kCudaMaxHeads = 128;   // CudaBackendOptions defaults, kept when a config lacks the sizes
constexpr int64_t kCudaMaxHeadDim = 256;
constexpr int64_t kCudaMaxK = 32768;
constexpr int64_t kCublasWorkspace = int64_t{32} << 20;
constexpr int64_t kPinnedStaging = int64_t{64} << 20;

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}
int64_t ceil_div(int64_t x, int64_t m) {
  return (x + m - 1) / m;
}

std::string gb(int64_t bytes) {
  return format_bytes(static_cast<double>(bytes));
}

std::string recurrent_name(const RecurrentFacts& r) {
  return r.kind == "gated_deltanet" ? "Gated DeltaNet" : r.kind == "mamba2" ? "Mamba-2" : r.kind;
}

// Bytes of a parameter breakdown at a weight format: embeddings, head and norms stay 16-bit when the rest
// is quantized (as FP8/INT4 checkpoints ship them).
int64_t weight_bytes_at(const ParameterBreakdown& p, double bytes_per_param) {
  const int64_t kept = p.embedding + p.lm_head + p.norms;
  const double kept_bytes = std::max(bytes_per_param, 2.0);
  return static_cast<int64_t>(std::llround(static_cast<double>(p.total() - kept) * bytes_per_param +
                                           static_cast<double>(kept) * kept_bytes));
}

// Per-row activation bytes beyond the dense transformer's buffers, for the families helium does not
// implement yet (an estimate: the buffers their forward would need at least).
int64_t extra_row_bytes(const ModelShape& s) {
  int64_t floats = 0;
  if (s.attention.output_gate) floats += int64_t{s.attention.heads} * s.attention.head_dim;
  const RecurrentFacts& r = s.recurrent;
  if (r.kind == "gated_deltanet") {
    const int64_t value = int64_t{r.value_heads} * r.value_dim;
    floats +=
        2 * r.conv_channels() + 2 * value + 2LL * r.value_heads;  // qkv before/after the conv, z, out, a/b
  } else if (r.kind == "mamba2") {
    const int64_t inner = int64_t{r.heads} * r.head_dim;
    floats += 2 * inner + 2 * r.conv_channels() + r.heads;  // in_proj output (z, xBC, dt), conv output, y
  }
  const MoeFacts& m = s.moe;
  if (m.layers > 0) {
    floats += m.experts;                               // router logits
    floats += int64_t{m.active} * 2 * m.intermediate;  // the chosen experts' gate/up
    floats += int64_t{m.shared_experts} * 2 * m.shared_intermediate;
    floats += (int64_t{m.active} + 1) * s.hidden;  // expert outputs before the weighted sum
    floats += 2LL * m.active;                      // routing weights and ids
  }
  return floats * 4;
}

// One plan for fixed options, without suggestions.
MemoryPlan plan_core(const PlanModel& model, const MemoryPlanOptions& o) {
  MemoryPlan plan;
  const ModelShape& s = model.shape;
  plan.model = model.name;
  plan.gpu = o.gpu;
  plan.context = o.context;
  plan.sequences = std::max(o.sequences, 1);
  plan.quantization = o.quantization.empty() ? model.quantization : o.quantization;
  plan.kv_element_bytes = o.kv_element_bytes > 0 ? o.kv_element_bytes : (o.gpu ? 2 : 4);
  plan.rows_per_forward = o.rows_per_forward > 0 ? o.rows_per_forward : static_cast<int>(o.gpu ? 4096 : 256);
  plan.rows_per_forward =
      static_cast<int>(std::min<int64_t>(plan.rows_per_forward, std::max<int64_t>(o.context, 1)));
  plan.device = !o.gpu            ? "CPU"
                : o.gpu_bytes > 0 ? o.device_name + " (" + gb(o.gpu_bytes) + ")"
                                  : o.device_name;
  const int64_t rows = plan.rows_per_forward;
  const int64_t positions = o.context * plan.sequences;
  const int eb = plan.kv_element_bytes;

  // Weights.
  const ParameterBreakdown p = parameter_breakdown(s);
  const double bpp = bytes_per_parameter(plan.quantization).value_or(2.0);
  if (model.measured_weight_bytes && plan.quantization == model.quantization) {
    plan.weight_bytes = *model.measured_weight_bytes;
  } else {
    plan.weight_bytes = weight_bytes_at(p, bpp);
  }
  plan.expert_bytes = static_cast<int64_t>(std::llround(static_cast<double>(p.routed_experts) * bpp));
  const int64_t dense_weights = plan.weight_bytes - plan.expert_bytes;

  // KV cache: full-attention layers only.
  plan.kv_bytes_per_token = 2LL * s.attention.layers * s.attention.kv_heads * s.attention.head_dim * eb;
  plan.kv_bytes = kv_cache_bytes(s, positions, eb);

  // Recurrent state: fp32 state and the conv window per layer and sequence, times its snapshots.
  const bool drafting = o.drafter && !model.drafter.empty();
  const int snapshots = 1 + (drafting ? std::max(o.speculative_tokens, 0) : 0);
  const int64_t per_sequence =
      int64_t{s.recurrent.layers} *
      (s.recurrent.state_bytes_per_layer() + s.recurrent.conv_state_bytes_per_layer(o.gpu ? 2 : 4));
  plan.recurrent_bytes = per_sequence * snapshots * plan.sequences;

  // Activations.
  if (model.measured_activation_bytes) {
    plan.activation_bytes = *model.measured_activation_bytes;
  } else {
    plan.activation_bytes = dense_activation_bytes(s, rows, o.context, s.attention.head_dim);
    if (!model.implemented) {
      plan.activation_bytes += rows * extra_row_bytes(s);
      plan.activations_estimated = true;
    }
  }

  // Drafter.
  std::string drafter_detail;
  if (drafting && model.drafter == "mtp") {
    const int64_t weights = static_cast<int64_t>(std::llround(static_cast<double>(mtp_parameters(s)) * bpp));
    const int64_t kv = (round_up(positions, kKvPageSize) + kKvScratchSlots) * 2LL * s.mtp_layers *
                       s.attention.kv_heads * s.attention.head_dim * eb;
    plan.drafter_bytes = weights + kv;
    drafter_detail = "the checkpoint's MTP head: " + std::to_string(s.mtp_layers) + " layer(s), weights " +
                     gb(weights) + ", KV " + gb(kv);
  } else if (drafting && model.drafter_shape) {
    const ModelShape& d = *model.drafter_shape;
    const double dbpp = bytes_per_parameter(model.drafter_quantization).value_or(2.0);
    const int64_t weights = weight_bytes_at(parameter_breakdown(d), dbpp);
    const int64_t kv = kv_cache_bytes(d, positions, eb);
    const int64_t act = dense_activation_bytes(d, rows, o.context, d.attention.head_dim);
    plan.drafter_bytes = weights + kv + act;
    drafter_detail =
        model.drafter + ": weights " + gb(weights) + ", KV " + gb(kv) + ", activations " + gb(act);
  }

  // CUDA backend reservations (cuda_backend.cu: attention partials, bf16 prefill copy, cuBLASLt, argmax keys).
  int64_t attention_scratch = 0, matmul_scratch = 0;
  if (o.gpu) {
    // engine.cpp sizes these from the model's config (heads, head_dim, widest matmul input).
    const bool sized = s.attention.heads > 0 && s.attention.head_dim > 0;
    const int64_t heads = sized ? s.attention.heads : kCudaMaxHeads;
    const int64_t head_dim = sized ? s.attention.head_dim : kCudaMaxHeadDim;
    int64_t max_k = std::max({s.hidden, s.ffn.intermediate, heads * head_dim});
    if (max_k <= 0) max_k = kCudaMaxK;
    // by the tiers the backend will use (HELIUM_CUDA_ATTN_PARTITIONS can change them)
    const int64_t partitions = cuda::max_partition_count(o.context, cuda::partition_tiers_in_force());
    attention_scratch = std::min(rows, kMaxDecodeRows) * heads * partitions * (head_dim + 2) * 4;
    // the bf16 copy of x for prefill GEMMs, or the tensor-core decode kernel's splits (matmul_scratch.h)
    matmul_scratch = static_cast<int64_t>(cuda::matmul_scratch_bytes(rows, max_k));
    const int64_t argmax_keys = std::max<int64_t>(std::max(rows, kMaxDecodeRows) * 8, 256);
    // select_candidates' chunk keys and counts, and its softmax group sums
    const int64_t select_scratch = 2 * kMaxDecodeRows * 256 * 4 + kMaxDecodeRows * 256 * 8;
    // the fused decode attention's partition counters, one int per row and query head (at least 256 bytes)
    const int64_t attention_counters = std::max<int64_t>(kMaxDecodeRows * heads * 4, 256);
    plan.backend_scratch_bytes =
        attention_scratch + matmul_scratch + kCublasWorkspace + argmax_keys + select_scratch + attention_counters;
  }

  // Items and placement.
  const Placement main = o.gpu ? Placement::Gpu : Placement::Host;
  {
    std::string detail = plan.quantization;
    if (!o.gpu) detail += ", memory-mapped from the checkpoint";
    if (s.moe.layers > 0)
      detail += "; embeddings, attention, " +
                (s.recurrent.layers > 0 ? recurrent_name(s.recurrent) + ", " : std::string()) +
                "routers, shared experts";
    plan.items.push_back(
        {s.moe.layers > 0 ? "weights (non-expert)" : "weights", dense_weights, main, detail});
  }
  {
    std::string detail = std::to_string(s.attention.layers) + " full-attention layers x " +
                         gb(plan.kv_bytes_per_token) + "/token x " + with_commas(positions) + " tokens";
    plan.items.push_back({"KV cache", plan.kv_bytes, main, detail});
  }
  if (plan.recurrent_bytes > 0)
    plan.items.push_back({"recurrent state", plan.recurrent_bytes, main,
                          std::to_string(s.recurrent.layers) + " " + recurrent_name(s.recurrent) +
                              " layers x " + gb(s.recurrent.state_bytes_per_layer()) + " (fp32) x " +
                              std::to_string(snapshots) + " snapshot(s) x " + std::to_string(plan.sequences) +
                              " sequence(s)"});
  plan.items.push_back({"activations", plan.activation_bytes, main,
                        std::to_string(rows) + " rows per forward" +
                            (plan.activations_estimated ? " (estimate: family not built yet)" : "")});
  if (plan.drafter_bytes > 0) plan.items.push_back({"drafter", plan.drafter_bytes, main, drafter_detail});
  if (o.gpu) {
    plan.items.push_back({"CUDA scratch", plan.backend_scratch_bytes, Placement::Gpu,
                          "attention partials " + gb(attention_scratch) + ", bf16 prefill input " +
                              gb(matmul_scratch) + ", cuBLASLt " + gb(kCublasWorkspace)});
    plan.items.push_back({"reserved", o.gpu_reserved_bytes, Placement::Gpu, "CUDA context, allocator slack"});
    plan.items.push_back({"pinned staging", kPinnedStaging, Placement::Host, "uploads and logits downloads"});
  }
  for (const auto& item : plan.items) {
    if (item.where == Placement::Gpu) plan.gpu_total += item.bytes;
    if (item.where == Placement::Host) plan.host_total += item.bytes;
  }
  plan.gpu_budget = o.gpu ? o.gpu_bytes : 0;
  plan.host_budget = o.host_bytes > 0 ? std::max<int64_t>(o.host_bytes - o.host_reserved_bytes, 0) : 0;

  if (!o.gpu) {
    // The CPU: everything is host memory. Weights are mapped, so the OS can page them from disk; the rest
    // must be resident.
    if (plan.expert_bytes > 0)
      plan.items.push_back({"routed experts", plan.expert_bytes, Placement::Host, "memory-mapped"});
    plan.host_total += plan.expert_bytes;
    if (plan.host_budget > 0) {
      const int64_t resident = plan.host_total - plan.weight_bytes;
      if (resident > plan.host_budget)
        plan.fits = false;
      else if (plan.host_total > plan.host_budget)
        plan.notes.push_back(
            "the weights do not fit in RAM next to the rest: the OS will read them from disk as "
            "needed (slow)");
    }
    return plan;
  }

  // The GPU: experts join the rest when they fit; otherwise, with offloading, the GPU keeps what fits as a
  // cache of whole experts and the rest goes to host RAM, then disk. An unknown GPU size (0) places
  // everything on the GPU and checks nothing.
  const int64_t room = plan.gpu_budget - plan.gpu_total;
  if (plan.expert_bytes == 0 || plan.expert_bytes <= room || plan.gpu_budget <= 0) {
    plan.experts_on_gpu = plan.expert_bytes;
    if (plan.expert_bytes > 0)
      plan.items.push_back(
          {"routed experts", plan.expert_bytes, Placement::Gpu,
           std::to_string(s.moe.layers) + " layers x " + std::to_string(s.moe.experts) + " experts"});
    plan.gpu_total += plan.expert_bytes;
    plan.fits = plan.gpu_budget <= 0 || plan.gpu_total <= plan.gpu_budget;
  } else if (o.offload_experts && room >= 0) {
    const int64_t count = int64_t{s.moe.layers} * s.moe.experts;
    const int64_t per_expert = count > 0 ? plan.expert_bytes / count : plan.expert_bytes;
    const int64_t on_gpu = per_expert > 0 ? room / per_expert * per_expert : 0;
    plan.experts_on_gpu = std::min(on_gpu, plan.expert_bytes);
    int64_t rest = plan.expert_bytes - plan.experts_on_gpu;
    int64_t host_room =
        plan.host_budget > 0 ? std::max<int64_t>(plan.host_budget - plan.host_total, 0) : rest;
    plan.experts_on_host = std::min(rest, host_room);
    plan.experts_on_disk = rest - plan.experts_on_host;
    if (plan.experts_on_gpu > 0)
      plan.items.push_back({"routed experts (cache)", plan.experts_on_gpu, Placement::Gpu,
                            with_commas(plan.experts_on_gpu / std::max<int64_t>(per_expert, 1)) + " of " +
                                with_commas(count) + " experts kept on the GPU"});
    if (plan.experts_on_host > 0)
      plan.items.push_back({"routed experts (offloaded)", plan.experts_on_host, Placement::Host,
                            "in host RAM, copied to the GPU as tokens need them"});
    if (plan.experts_on_disk > 0) {
      plan.items.push_back({"routed experts (offloaded)", plan.experts_on_disk, Placement::Disk,
                            "memory-mapped from the checkpoint: read from the SSD as tokens need them"});
      plan.notes.push_back(gb(plan.experts_on_disk) +
                           " of experts do not fit in host RAM either: they stream from "
                           "the SSD (decode speed then follows the disk)");
    }
    plan.gpu_total += plan.experts_on_gpu;
    plan.host_total += plan.experts_on_host;
    plan.disk_total += plan.experts_on_disk;
    plan.fits = true;
  } else {
    plan.gpu_total += plan.expert_bytes;
    plan.items.push_back(
        {"routed experts", plan.expert_bytes, Placement::Gpu,
         std::to_string(s.moe.layers) + " layers x " + std::to_string(s.moe.experts) + " experts"});
    plan.fits = false;
  }
  if (plan.host_budget > 0 && plan.host_total > plan.host_budget) plan.fits = false;
  return plan;
}

}  // namespace

int64_t kv_cache_bytes(const ModelShape& shape, int64_t positions, int element_bytes) {
  const int64_t slots = round_up(std::max<int64_t>(positions, 1), kKvPageSize) + kKvScratchSlots;
  // Plus the slot-move table accept_tree_path() uploads (2 x 64 I32).
  return slots * 2LL * shape.attention.layers * shape.attention.kv_heads * shape.attention.head_dim *
             element_bytes +
         2 * kKvScratchSlots * 4;
}

int64_t dense_activation_bytes(const ModelShape& s, int64_t rows, int64_t context, int rope_dims) {
  const int64_t q = int64_t{s.attention.heads} * s.attention.head_dim;
  const int64_t kv = int64_t{s.attention.kv_heads} * s.attention.head_dim;
  const int64_t per_row_floats = 2 * s.hidden + 2 * q + 2 * kv + 2 * s.ffn.intermediate;
  const int64_t max_pages = ceil_div(context, kKvPageSize) + 1;
  return rows * per_row_floats * 4                      // x, xn, q, k, v, attn_out, gate, up
         + std::min(rows, kMaxLogitRows) * s.vocab * 4  // logits
         + std::min(rows, kMaxLogitRows) * 4            // the logit rows' argmax
         // sampling candidates (x, id; model.h kMaxCandidates), temperatures, top_k, counts, valid, totals
         + std::min(rows, kMaxLogitRows) * (int64_t{kMaxCandidates} * 8 + 24)
         + int64_t{rope_dims / 2} * 4                   // RoPE inverse frequencies
         // tree masks (I64), tokens, positions, slots, rows, prefixes, logit index, token sources: each
         // region of rows rounded up to 4 (dense_transformer.cpp's StepInputs), then the block tables
         + round_up(rows, 4) * 36 + rows * max_pages * 4;
}

MemoryPlan plan_memory(const PlanModel& model, const MemoryPlanOptions& options) {
  MemoryPlan plan = plan_core(model, options);
  if (plan.fits) return plan;

  // What it needs, then each single change that would make it fit.
  std::string msg = plan.model + " does not fit ";
  if (plan.gpu) {
    msg += "on " + plan.device + ": it needs " + gb(plan.gpu_total) + " of GPU memory, the device has " +
           gb(plan.gpu_budget) + ".";
    if (plan.host_budget > 0 && plan.host_total > plan.host_budget)
      msg += " It also needs " + gb(plan.host_total) + " of host RAM, there is " + gb(plan.host_budget) +
             " to spare (after " + gb(options.host_reserved_bytes) + " kept for the system).";
  } else {
    msg += "in host RAM: it needs " + gb(plan.host_total - plan.weight_bytes) +
           " besides the memory-mapped weights, " + "there is " + gb(plan.host_budget) + " to spare.";
  }
  msg += "\n  needs: weights " + gb(plan.weight_bytes) + " (" + plan.quantization + ")";
  msg += ", KV cache " + gb(plan.kv_bytes) + " for " + with_commas(plan.context * plan.sequences) + " tokens";
  if (plan.recurrent_bytes > 0) msg += ", recurrent state " + gb(plan.recurrent_bytes);
  msg += ", activations " + gb(plan.activation_bytes);
  if (plan.drafter_bytes > 0) msg += ", drafter " + gb(plan.drafter_bytes);
  if (plan.backend_scratch_bytes > 0) msg += ", CUDA scratch " + gb(plan.backend_scratch_bytes);
  if (plan.gpu) msg += ", reserved " + gb(options.gpu_reserved_bytes);

  std::vector<std::string> fixes;
  // A smaller context: the largest multiple of 1024 that fits.
  {
    int64_t lo = 0, hi = options.context / 1024;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      MemoryPlanOptions t = options;
      t.context = mid * 1024;
      if (mid * 1024 < options.context && plan_core(model, t).fits)
        lo = mid;
      else
        hi = mid - 1;
    }
    if (lo > 0) {
      MemoryPlanOptions t = options;
      t.context = lo * 1024;
      fixes.push_back("--ctx-size " + std::to_string(lo * 1024) + " (KV cache " +
                      gb(plan_core(model, t).kv_bytes) + ")");
    }
  }
  const double current = bytes_per_parameter(plan.quantization).value_or(2.0);
  for (const char* q : {"fp8", "int4"}) {
    if (*bytes_per_parameter(q) >= current) continue;
    MemoryPlanOptions t = options;
    t.quantization = q;
    const MemoryPlan alt = plan_core(model, t);
    if (alt.fits) {
      fixes.push_back(std::string("--quantization ") + q + " (weights " + gb(alt.weight_bytes) +
                      "; needs a " + q + " checkpoint, which this build cannot load yet)");
      break;
    }
  }
  if (plan.expert_bytes > 0 && !options.offload_experts && plan.gpu) {
    MemoryPlanOptions t = options;
    t.offload_experts = true;
    const MemoryPlan alt = plan_core(model, t);
    if (alt.fits)
      fixes.push_back("--offload-experts (" + gb(alt.experts_on_host + alt.experts_on_disk) + " of " +
                      gb(alt.expert_bytes) + " of experts to host RAM" +
                      (alt.experts_on_disk > 0 ? " and disk" : "") + ")");
  }
  if (plan.drafter_bytes > 0) {
    MemoryPlanOptions t = options;
    t.drafter = false;
    if (plan_core(model, t).fits) fixes.push_back("--no-drafter (saves " + gb(plan.drafter_bytes) + ")");
  }
  if (plan.gpu) {
    MemoryPlanOptions t = options;
    t.gpu_bytes = plan.gpu_total;
    if (plan_core(model, t).fits)
      fixes.push_back("a GPU with at least " + gb(plan.gpu_total) + " (--gpu-memory)");
  }
  if (fixes.empty()) {
    msg +=
        "\n  no single change makes it fit: combine a smaller --ctx-size, a quantized checkpoint"
        " (--quantization) and --offload-experts, or use a larger device";
  } else {
    msg += "\n  any one of these would make it fit:";
    for (const auto& f : fixes) msg += "\n    " + f;
  }
  plan.refusal = msg;
  return plan;
}

void print_memory_plan(FILE* out, const MemoryPlan& plan) {
  std::fprintf(out, "memory plan: %s on %s, context %s x %d sequence(s), weights %s, KV cache %s\n",
               plan.model.c_str(), plan.device.c_str(), with_commas(plan.context).c_str(), plan.sequences,
               plan.quantization.c_str(), plan.kv_element_bytes == 2 ? "bf16" : "f32");
  std::fprintf(out, "  %-27s %10s %10s %10s  %s\n", "", "GPU", "host", "disk", "");
  for (const auto& item : plan.items) {
    const std::string b = gb(item.bytes);
    std::fprintf(out, "  %-27s %10s %10s %10s  %s\n", item.what.c_str(),
                 item.where == Placement::Gpu ? b.c_str() : "",
                 item.where == Placement::Host ? b.c_str() : "",
                 item.where == Placement::Disk ? b.c_str() : "", item.detail.c_str());
  }
  std::fprintf(out, "  %-27s %10s %10s %10s\n", "total", plan.gpu ? gb(plan.gpu_total).c_str() : "",
               gb(plan.host_total).c_str(), plan.disk_total > 0 ? gb(plan.disk_total).c_str() : "");
  std::string budget = "  available                   ";
  if (plan.gpu && plan.gpu_budget <= 0) {
    budget += "   unknown";
  } else if (plan.gpu) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%10s", gb(plan.gpu_budget).c_str());
    budget += buf;
  } else {
    budget += std::string(10, ' ');
  }
  if (plan.host_budget > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %10s", gb(plan.host_budget).c_str());
    budget += buf;
  } else {
    budget += "    unknown";
  }
  std::fprintf(out, "%s\n", budget.c_str());
  for (const auto& n : plan.notes) std::fprintf(out, "  note: %s\n", n.c_str());
  if (plan.fits) {
    if (plan.gpu && plan.gpu_budget <= 0)
      std::fprintf(out, "  GPU memory not checked (its size is not known here)\n");
    else if (plan.gpu)
      std::fprintf(out, "  fits: %s of GPU memory left\n", gb(plan.gpu_budget - plan.gpu_total).c_str());
    else
      std::fprintf(out, "  fits in host RAM\n");
  } else {
    std::fprintf(out, "  refused: %s\n", plan.refusal.c_str());
  }
}

namespace {

using json = nlohmann::json;

struct ConfigReader {
  const json& c;
  std::string origin;
  Result<int64_t> integer(const char* key) const {
    if (!c.contains(key)) return Status::error(origin + ": missing '" + key + "'");
    if (!c[key].is_number_integer()) return Status::error(origin + ": '" + key + "' is not an integer");
    return c[key].get<int64_t>();
  }
  int64_t integer_or(const char* key, int64_t fallback) const {
    return c.contains(key) && c[key].is_number_integer() ? c[key].get<int64_t>() : fallback;
  }
  bool boolean_or(const char* key, bool fallback) const {
    return c.contains(key) && c[key].is_boolean() ? c[key].get<bool>() : fallback;
  }
};

Status read_attention(const ConfigReader& r, ModelShape& s, const char* heads_key, const char* kv_key) {
  HELIUM_ASSIGN_OR_RETURN(int64_t heads, r.integer(heads_key));
  s.attention.heads = static_cast<int>(heads);
  s.attention.kv_heads = static_cast<int>(r.integer_or(kv_key, heads));
  s.attention.head_dim = static_cast<int>(r.integer_or("head_dim", heads > 0 ? s.hidden / heads : 0));
  if (s.attention.heads <= 0 || s.attention.kv_heads <= 0 || s.attention.head_dim <= 0)
    return Status::error(r.origin + ": attention heads and head_dim must be positive");
  return Status::ok();
}

// qwen3_moe / qwen3_next / qwen3_5_moe: which layers are MoE (decoder_sparse_step, mlp_only_layers).
void split_moe_layers(const ConfigReader& r, ModelShape& s) {
  const int64_t step = std::max<int64_t>(r.integer_or("decoder_sparse_step", 1), 1);
  std::vector<int64_t> mlp_only;
  if (r.c.contains("mlp_only_layers") && r.c["mlp_only_layers"].is_array())
    for (const auto& v : r.c["mlp_only_layers"])
      if (v.is_number_integer()) mlp_only.push_back(v.get<int64_t>());
  for (int i = 0; i < s.layers; ++i) {
    const bool moe = std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end() && (i + 1) % step == 0;
    if (moe)
      ++s.moe.layers;
    else
      ++s.ffn.layers;
  }
}

// The routed experts' sizes: the expert count (under `experts_key`), experts per token and their
// intermediate size; then the dense MLP layers' intermediate size when the model has any.
Status read_moe_sizes(const ConfigReader& r, const char* experts_key, ModelShape& s) {
  HELIUM_ASSIGN_OR_RETURN(int64_t experts, r.integer(experts_key));
  HELIUM_ASSIGN_OR_RETURN(int64_t active, r.integer("num_experts_per_tok"));
  HELIUM_ASSIGN_OR_RETURN(s.moe.intermediate, r.integer("moe_intermediate_size"));
  s.moe.experts = static_cast<int>(experts);
  s.moe.active = static_cast<int>(active);
  if (s.ffn.layers > 0) {
    HELIUM_ASSIGN_OR_RETURN(s.ffn.intermediate, r.integer("intermediate_size"));
  }
  return Status::ok();
}

}  // namespace

Result<ModelShape> model_shape_from_config(const nlohmann::json& config, const std::string& origin) {
  if (!config.is_object() || !config.contains("model_type") || !config["model_type"].is_string())
    return Status::error(origin + ": no model_type");
  const ConfigReader r{config, origin};
  ModelShape s;
  s.family = config["model_type"].get<std::string>();
  const std::string& f = s.family;
  HELIUM_ASSIGN_OR_RETURN(s.hidden, r.integer("hidden_size"));
  HELIUM_ASSIGN_OR_RETURN(s.vocab, r.integer("vocab_size"));
  s.tied_embeddings = r.boolean_or("tie_word_embeddings", false);

  if (f == "llama" || f == "qwen2" || f == "qwen3" || f == "mistral" || f == "qwen3_moe") {
    HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("num_hidden_layers"));
    s.layers = static_cast<int>(layers);
    HELIUM_RETURN_IF_ERROR(read_attention(r, s, "num_attention_heads", "num_key_value_heads"));
    s.attention.layers = s.layers;
    if (f == "qwen3_moe") {
      split_moe_layers(r, s);
      HELIUM_RETURN_IF_ERROR(read_moe_sizes(r, "num_experts", s));
    } else {
      s.ffn.layers = s.layers;
      HELIUM_ASSIGN_OR_RETURN(s.ffn.intermediate, r.integer("intermediate_size"));
    }
    return s;
  }

  if (f == "qwen3_next" || f == "qwen3_5" || f == "qwen3_5_text" || f == "qwen3_5_moe" ||
      f == "qwen3_5_moe_text") {
    HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("num_hidden_layers"));
    s.layers = static_cast<int>(layers);
    HELIUM_RETURN_IF_ERROR(read_attention(r, s, "num_attention_heads", "num_key_value_heads"));
    s.attention.output_gate = r.boolean_or("attn_output_gate", true);
    // layer_types, or every full_attention_interval-th layer.
    if (config.contains("layer_types") && config["layer_types"].is_array()) {
      if (static_cast<int64_t>(config["layer_types"].size()) != layers)
        return Status::error(origin + ": layer_types has " + std::to_string(config["layer_types"].size()) +
                             " entries for " + std::to_string(layers) + " layers");
      for (const auto& t : config["layer_types"]) {
        if (t == "full_attention")
          ++s.attention.layers;
        else if (t == "linear_attention")
          ++s.recurrent.layers;
        else
          return Status::error(origin + ": unknown layer type " + t.dump());
      }
    } else {
      const int64_t interval = std::max<int64_t>(r.integer_or("full_attention_interval", 4), 1);
      for (int i = 0; i < s.layers; ++i)
        ((i + 1) % interval == 0 ? s.attention.layers : s.recurrent.layers)++;
    }
    s.recurrent.kind = "gated_deltanet";
    HELIUM_ASSIGN_OR_RETURN(int64_t kh, r.integer("linear_num_key_heads"));
    HELIUM_ASSIGN_OR_RETURN(int64_t vh, r.integer("linear_num_value_heads"));
    s.recurrent.key_heads = static_cast<int>(kh);
    s.recurrent.value_heads = static_cast<int>(vh);
    s.recurrent.key_dim = static_cast<int>(r.integer_or("linear_key_head_dim", 128));
    s.recurrent.value_dim = static_cast<int>(r.integer_or("linear_value_head_dim", 128));
    s.recurrent.conv_kernel = static_cast<int>(r.integer_or("linear_conv_kernel_dim", 4));
    s.mtp_layers = static_cast<int>(r.integer_or("mtp_num_hidden_layers", 0));
    if (r.integer_or("num_experts", 0) > 0) {
      split_moe_layers(r, s);
      HELIUM_RETURN_IF_ERROR(read_moe_sizes(r, "num_experts", s));
      s.moe.shared_intermediate = r.integer_or("shared_expert_intermediate_size", 0);
      s.moe.shared_experts = s.moe.shared_intermediate > 0 ? 1 : 0;
    } else {
      s.ffn.layers = s.layers;
      HELIUM_ASSIGN_OR_RETURN(s.ffn.intermediate, r.integer("intermediate_size"));
    }
    return s;
  }

  if (f == "nemotron_h") {
    // One op per block: M = Mamba-2, E = MoE, * = attention, - = dense MLP.
    std::string pattern;
    if (config.contains("hybrid_override_pattern") && config["hybrid_override_pattern"].is_string()) {
      pattern = config["hybrid_override_pattern"].get<std::string>();
    } else if (config.contains("layers_block_type") && config["layers_block_type"].is_array()) {
      for (const auto& t : config["layers_block_type"]) {
        const std::string k = t.is_string() ? t.get<std::string>() : "";
        pattern.push_back(k == "mamba"       ? 'M'
                          : k == "moe"       ? 'E'
                          : k == "attention" ? '*'
                          : k == "mlp"       ? '-'
                                             : '?');
      }
    } else {
      return Status::error(origin + ": neither hybrid_override_pattern nor layers_block_type");
    }
    s.block_layout = BlockLayout::OneOpPerBlock;
    s.layers = static_cast<int>(pattern.size());
    for (char c : pattern) {
      if (c == 'M')
        ++s.recurrent.layers;
      else if (c == 'E')
        ++s.moe.layers;
      else if (c == '*')
        ++s.attention.layers;
      else if (c == '-')
        ++s.ffn.layers;
      else
        return Status::error(origin + ": unknown block type '" + std::string(1, c) +
                             "' in the layer pattern");
    }
    HELIUM_RETURN_IF_ERROR(read_attention(r, s, "num_attention_heads", "num_key_value_heads"));
    s.recurrent.kind = "mamba2";
    HELIUM_ASSIGN_OR_RETURN(int64_t heads, r.integer("mamba_num_heads"));
    HELIUM_ASSIGN_OR_RETURN(int64_t head_dim, r.integer("mamba_head_dim"));
    HELIUM_ASSIGN_OR_RETURN(int64_t state, r.integer("ssm_state_size"));
    s.recurrent.heads = static_cast<int>(heads);
    s.recurrent.head_dim = static_cast<int>(head_dim);
    s.recurrent.state = static_cast<int>(state);
    s.recurrent.groups = static_cast<int>(r.integer_or("n_groups", r.integer_or("mamba_n_groups", 1)));
    s.recurrent.conv_kernel = static_cast<int>(r.integer_or("conv_kernel", r.integer_or("mamba_d_conv", 4)));
    const std::string act =
        config.value("mlp_hidden_act", std::string("relu2")) == "relu2" ? "relu2" : "swiglu";
    if (s.moe.layers > 0) {
      HELIUM_RETURN_IF_ERROR(read_moe_sizes(r, "n_routed_experts", s));
      s.moe.shared_experts = static_cast<int>(r.integer_or("n_shared_experts", 1));
      s.moe.shared_intermediate = r.integer_or("moe_shared_expert_intermediate_size", 0);
      if (s.moe.shared_intermediate == 0) s.moe.shared_experts = 0;
      s.moe.activation = act;
    } else if (s.ffn.layers > 0) {
      HELIUM_ASSIGN_OR_RETURN(s.ffn.intermediate, r.integer("intermediate_size"));
    }
    if (s.ffn.layers > 0) s.ffn.activation = act;
    return s;
  }

  if (f == "llada2_moe") {
    HELIUM_ASSIGN_OR_RETURN(int64_t layers, r.integer("num_hidden_layers"));
    s.layers = static_cast<int>(layers);
    HELIUM_RETURN_IF_ERROR(read_attention(r, s, "num_attention_heads", "num_key_value_heads"));
    s.attention.layers = s.layers;
    const int64_t dense = std::clamp<int64_t>(r.integer_or("first_k_dense_replace", 0), 0, layers);
    s.ffn.layers = static_cast<int>(dense);
    s.moe.layers = static_cast<int>(layers - dense);
    HELIUM_RETURN_IF_ERROR(read_moe_sizes(r, "num_experts", s));
    s.moe.shared_experts = static_cast<int>(r.integer_or("num_shared_experts", 0));
    s.moe.shared_intermediate = s.moe.shared_experts > 0 ? s.moe.intermediate : 0;
    return s;
  }
  return Status::error(origin + ": no shape rules for model_type '" + f + "'");
}

Result<int64_t> parse_byte_size(std::string_view text) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  const std::string number = t.substr(0, i), unit = t.substr(i);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1)
    return Status::error("'" + std::string(text) + "' is not a size (e.g. 141GB, 80GiB, 512MiB)");
  const double value = std::strtod(number.c_str(), nullptr);
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kb")
    scale = 1e3;
  else if (unit == "m" || unit == "mb")
    scale = 1e6;
  else if (unit == "g" || unit == "gb")
    scale = 1e9;
  else if (unit == "t" || unit == "tb")
    scale = 1e12;
  else if (unit == "kib")
    scale = 1024.0;
  else if (unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return Status::error("'" + std::string(text) + "': unknown unit '" + unit +
                         "' (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  const double bytes = value * scale;
  if (!(bytes >= 1) || bytes > 9e18) return Status::error("'" + std::string(text) + "' is not a usable size");
  return static_cast<int64_t>(bytes);
}

Result<MemoryPlan> plan_for_engine(const Engine& engine, const std::string& name, int64_t gpu_bytes,
                                   int64_t host_bytes) {
  const Checkpoint& ckpt = engine.checkpoint();
  HELIUM_ASSIGN_OR_RETURN(ModelShape shape, model_shape_from_config(ckpt.config, ckpt.dir + "/config.json"));
  PlanModel model;
  model.name = name;
  model.shape = shape;
  model.implemented = true;
  const ModelInfo& info = engine.model().info();
  model.measured_weight_bytes = info.weight_bytes;
  model.quantization = info.weight_dtype == "F32" ? "f32" : info.weight_dtype == "F16" ? "f16" : "bf16";
  MemoryPlanOptions o;
  o.gpu = engine.backend_name().rfind("cuda", 0) == 0;
  o.device_name = o.gpu ? engine.backend_name() : "CPU";
  o.gpu_bytes = gpu_bytes;
  o.host_bytes = host_bytes;
  o.context = engine.context();
  o.rows_per_forward = engine.model().max_rows();
  o.drafter = false;
  const KvSpec kv = engine.model().kv_spec();
  const int64_t per_slot = 2LL * kv.layers * kv.kv_dim;
  const int64_t slots = engine.kv_cache().capacity() + KvCache::kMaxTreeRows;
  if (per_slot > 0 && slots > 0)
    o.kv_element_bytes = static_cast<int>(engine.kv_cache().bytes() / (per_slot * slots));
  return plan_memory(model, o);
}

int64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

}  // namespace helium
