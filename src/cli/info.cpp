// cli/info.cpp — `helium info`: a model's architecture, parameters and memory plan. A directory is read
// (config and weight headers, never the weight data); a catalog name is planned from the catalog's shape
// facts alone; a repo id is looked up in the Hugging Face cache. Never downloads.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "backend/counting_backend.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "hub/progress.h"
#include "kv/kv_cache.h"
#include "loader/checkpoint.h"
#include "models/model.h"
#if HELIUM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace helium::cli {

void add_info_command(CLI::App& app, InfoOptions& o) {
  CLI::App* info =
      app.add_subcommand("info", "Print a model's architecture, parameter count and memory plan");
  info->add_option(
      "-m,--model", o.model,
      "A model directory, a catalog name (planned from the catalog's shapes alone), or a repo id in the "
      "Hugging Face cache; never downloads. Default: the embedded model");
  info->add_option("-c,--ctx-size", o.context,
                   "Context length to plan the KV cache for (0 = the model's, at most 32768)");
  info->add_option(
          "--device", o.device,
          "Plan for: cuda, cpu, or auto (a GPU for catalog models and when one is present, else the CPU)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  info->add_option("--gpu-memory", o.gpu_memory,
                   "GPU memory to plan for, e.g. 141GB or 80GiB (default: an H200, 141 GB)");
  info->add_option("--host-memory", o.host_memory,
                   "Host RAM to plan for, e.g. 512GB (default: this machine's)");
  info->add_option("--quantization", o.quantization, "Plan for weights in another format")
      ->check(CLI::IsMember({"f32", "bf16", "f16", "fp8", "int4"}));
  info->add_flag("--offload-experts", o.offload_experts,
                 "Plan MoE experts that do not fit on the GPU into host RAM (then disk)");
  info->add_flag("--no-drafter", o.no_drafter, "Plan without the recommended drafter");
}

namespace {

bool gpu_present() {
#if HELIUM_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::string billions(int64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f B", static_cast<double>(n) / 1e9);
  return buf;
}

// The architecture from shape facts, for families described by the catalog or by shape rules alone.
void print_shape(const ModelShape& s) {
  std::string layers = std::to_string(s.layers) + " layers (";
  std::vector<std::string> parts;
  if (s.attention.layers) parts.push_back(std::to_string(s.attention.layers) + " full attention");
  if (s.recurrent.layers)
    parts.push_back(std::to_string(s.recurrent.layers) +
                    (s.recurrent.kind == "mamba2" ? " Mamba-2" : " Gated DeltaNet"));
  if (s.block_layout == BlockLayout::OneOpPerBlock) {
    if (s.moe.layers) parts.push_back(std::to_string(s.moe.layers) + " MoE");
    if (s.ffn.layers) parts.push_back(std::to_string(s.ffn.layers) + " MLP");
  }
  for (size_t i = 0; i < parts.size(); ++i) layers += (i ? ", " : "") + parts[i];
  layers += ")";
  std::printf("architecture %s: %s, hidden %lld, vocab %lld%s\n", s.family.c_str(), layers.c_str(),
              static_cast<long long>(s.hidden), static_cast<long long>(s.vocab),
              s.tied_embeddings ? ", tied embeddings" : "");
  const AttentionFacts& a = s.attention;
  std::printf("             attention: %d heads (%d KV) of %d%s\n", a.heads, a.kv_heads, a.head_dim,
              a.output_gate ? ", gated output" : "");
  const RecurrentFacts& r = s.recurrent;
  if (r.kind == "gated_deltanet")
    std::printf(
        "             Gated DeltaNet: %d key / %d value heads of %d x %d, conv %d; state %s per layer\n",
        r.key_heads, r.value_heads, r.key_dim, r.value_dim, r.conv_kernel,
        format_bytes(static_cast<double>(r.state_bytes_per_layer())).c_str());
  else if (r.kind == "mamba2")
    std::printf("             Mamba-2: %d heads of %d, state %d, %d groups, conv %d; state %s per layer\n",
                r.heads, r.head_dim, r.state, r.groups, r.conv_kernel,
                format_bytes(static_cast<double>(r.state_bytes_per_layer())).c_str());
  if (s.ffn.layers)
    std::printf("             FFN: %d layers of %lld (%s)\n", s.ffn.layers,
                static_cast<long long>(s.ffn.intermediate), s.ffn.activation.c_str());
  if (s.moe.layers)
    std::printf("             MoE: %d layers of %d experts of %lld, %d active per token%s (%s)\n",
                s.moe.layers, s.moe.experts, static_cast<long long>(s.moe.intermediate), s.moe.active,
                s.moe.shared_experts ? (", " + std::to_string(s.moe.shared_experts) + " shared of " +
                                        std::to_string(s.moe.shared_intermediate))
                                           .c_str()
                                     : "",
                s.moe.activation.c_str());
  if (s.mtp_layers) std::printf("             MTP: %d multi-token-prediction layer(s)\n", s.mtp_layers);
}

struct PlanSettings {
  MemoryPlanOptions options;
  std::string assumption;  // printed when the GPU was assumed
};

Result<PlanSettings> plan_settings(const InfoOptions& o, bool gpu_by_default, int64_t context) {
  PlanSettings p;
  MemoryPlanOptions& m = p.options;
  m.context = context;
  m.gpu = o.device == "cuda" ||
          (o.device == "auto" && (gpu_by_default || gpu_present() || !o.gpu_memory.empty()));
  if (!o.gpu_memory.empty()) {
    auto bytes = parse_byte_size(o.gpu_memory);
    if (!bytes.is_ok()) return bytes.status().with_context("--gpu-memory");
    m.gpu_bytes = bytes.value();
    m.device_name = "GPU";
  } else if (m.gpu) {
    p.assumption = "an H200 with 141 GB is assumed (--gpu-memory to change)";
  }
  m.host_bytes = host_memory_bytes();
  if (!o.host_memory.empty()) {
    auto bytes = parse_byte_size(o.host_memory);
    if (!bytes.is_ok()) return bytes.status().with_context("--host-memory");
    m.host_bytes = bytes.value();
  }
  m.quantization = o.quantization;
  m.offload_experts = o.offload_experts;
  m.drafter = !o.no_drafter;
  return p;
}

void print_plan(const PlanModel& model, const PlanSettings& settings) {
  const MemoryPlan plan = plan_memory(model, settings.options);
  if (!settings.assumption.empty()) std::printf("device       %s\n", settings.assumption.c_str());
  print_memory_plan(stdout, plan);
}

// A checkpoint directory: its config, weights (mapped, not read) and, for families helium has, the
// activation buffers the model plans, counted by a backend that allocates nothing.
int local_info(const InfoOptions& o, const std::string& dir, const CatalogEntry* entry,
               const Catalog* catalog) {
  auto ckpt = load_checkpoint(dir);
  if (!ckpt.is_ok()) {
    std::cerr << "helium: " << ckpt.error_message() << "\n";
    return 1;
  }
  for (const auto& w : ckpt->warnings) std::cerr << "helium: warning: " << w << "\n";
  const int64_t context = context_for(ckpt.value(), o.context);
  auto shape = model_shape_from_config(ckpt->config, dir + "/config.json");
  CountingBackend counter;
  ModelOptions mo;
  mo.max_context = context;
  auto model = load_model(ckpt.value(), counter, mo);
  if (!model.is_ok() && !shape.is_ok()) {
    std::cerr << "helium: " << model.error_message() << "\n";
    return 1;
  }
  std::printf("model        %s\n", dir.c_str());
  PlanModel pm;
  pm.name = entry != nullptr ? entry->name : dir;
  if (model.is_ok()) {
    const ModelInfo& m = model.value()->info();
    std::printf("architecture %s: %d layers, hidden %lld, %d heads (%d KV) of %d, FFN %lld, vocab %lld\n",
                m.family.c_str(), m.layers, static_cast<long long>(m.hidden_size), m.n_heads, m.n_kv_heads,
                m.head_dim, static_cast<long long>(m.intermediate_size),
                static_cast<long long>(m.vocab_size));
    std::printf("parameters   %lld (%.3f B)\n", static_cast<long long>(m.parameters), m.parameters / 1e9);
    pm.measured_weight_bytes = m.weight_bytes;
    pm.quantization = m.weight_dtype == "F32" ? "f32" : m.weight_dtype == "F16" ? "f16" : "bf16";
    pm.implemented = true;
  } else {
    print_shape(shape.value());
    std::printf("parameters   %s (from the shape; the weights hold %s)\n",
                billions(parameter_breakdown(shape.value()).total()).c_str(),
                format_bytes(static_cast<double>(ckpt->weights.total_bytes())).c_str());
    std::printf("supported    no: %s\n", model.error_message().c_str());
    pm.measured_weight_bytes = static_cast<int64_t>(ckpt->weights.total_bytes());
  }
  if (!shape.is_ok()) {
    std::cerr << "helium: " << shape.error_message() << "\n";
    return 1;
  }
  pm.shape = shape.value();
  if (entry != nullptr && !entry->drafter.empty()) {
    pm.drafter = entry->drafter;
    const CatalogEntry* d = catalog != nullptr ? catalog->find(entry->drafter) : nullptr;
    if (d != nullptr) {
      pm.drafter_shape = d->shape;
      pm.drafter_quantization = d->quantization;
    }
  }
  auto settings = plan_settings(o, /*gpu_by_default=*/false, context);
  if (!settings.is_ok()) {
    std::cerr << "helium: " << settings.error_message() << "\n";
    return 1;
  }
  // The counted activations are those of the CPU's 256-row plan; other plans use the same formula.
  if (model.is_ok() && !settings->options.gpu)
    pm.measured_activation_bytes = static_cast<int64_t>(counter.allocated);
  print_plan(pm, settings.value());
  return 0;
}

// A catalog entry planned from its shape facts alone: nothing is read or downloaded.
int catalog_info(const InfoOptions& o, const CatalogEntry& e, const Catalog& catalog) {
  const HubCache cache(HubSettings::from_environment().cache_dir);
  const EntryStatus status = entry_status(e, cache, HELIUM_SOURCE_DIR);
  const std::vector<std::string> families = supported_model_types();
  const bool built = std::find(families.begin(), families.end(), e.shape.family) != families.end();
  const bool supported = built && supported_by_version(e, HELIUM_VERSION);
  std::printf("model        %s: %s\n", e.name.c_str(), e.description.c_str());
  std::printf("repository   %s @ %s (%s)\n", e.repo.c_str(), e.revision.c_str(),
              status.downloaded ? ("downloaded: " + status.dir).c_str()
                                : ("not downloaded; `helium pull " + e.name + "`").c_str());
  print_shape(e.shape);
  const ParameterBreakdown p = parameter_breakdown(e.shape);
  std::printf(
      "parameters   %s total, %s active (published); from the shape: text model %s, %s read per token\n",
      billions(e.parameters.total).c_str(), billions(e.parameters.active).c_str(),
      billions(p.total()).c_str(), billions(p.per_token).c_str());
  const int64_t context = o.context > 0 ? o.context : std::min<int64_t>(e.context, 32768);
  std::printf("context      %s tokens (planned for %s; -c to change)\n", with_commas(e.context).c_str(),
              with_commas(context).c_str());
  std::string drafter = e.drafter.empty() ? "none" : e.drafter;
  if (e.drafter == "mtp") drafter += ": the checkpoint's own multi-token-prediction layer";
  std::printf("drafter      %s\n", drafter.c_str());
  std::printf("quantization %s\n", e.quantization.c_str());
  if (supported)
    std::printf("supported    yes, since helium %s\n", e.supported_since.c_str());
  else
    std::printf("supported    no: %s\n", e.supported_since == "unsupported" ? e.unsupported_reason.c_str()
                                         : built
                                             ? ("needs helium " + e.supported_since).c_str()
                                             : ("this build has no " + e.shape.family + " family").c_str());
  PlanModel pm;
  pm.name = e.name;
  pm.shape = e.shape;
  pm.quantization = e.quantization;
  pm.implemented = built;
  pm.drafter = e.drafter;
  if (!e.drafter.empty() && e.drafter != "mtp") {
    if (const CatalogEntry* d = catalog.find(e.drafter)) {
      pm.drafter_shape = d->shape;
      pm.drafter_quantization = d->quantization;
    }
  }
  auto settings = plan_settings(o, /*gpu_by_default=*/true, context);
  if (!settings.is_ok()) {
    std::cerr << "helium: " << settings.error_message() << "\n";
    return 1;
  }
  print_plan(pm, settings.value());
  return 0;
}

}  // namespace

int info_command(const InfoOptions& o) {
  const std::string name = o.model.empty() ? default_model_path() : o.model;
  std::error_code ec;
  if (std::filesystem::is_directory(name, ec)) return local_info(o, name, nullptr, nullptr);
  std::string catalog_error;
  const Catalog* catalog = cli_catalog(&catalog_error);
  if (const CatalogEntry* entry = catalog != nullptr ? catalog->find(name) : nullptr) {
    if (entry->is_local())
      return local_info(o, std::string(HELIUM_SOURCE_DIR) + "/" + entry->local_path, entry, catalog);
    return catalog_info(o, *entry, *catalog);
  }
  // A repo id: its snapshot in the cache (info never downloads).
  ResolveOptions ro = cli_resolve_options(catalog, /*offline=*/false);
  ro.allow_download = false;
  auto resolved = resolve_model(name, ro);
  if (!resolved.is_ok()) {
    std::cerr << "helium: " << resolved.error_message() << "\n";
    if (catalog == nullptr) std::cerr << "helium: (the catalog could not be read: " << catalog_error << ")\n";
    return 1;
  }
  return local_info(o, resolved->dir, nullptr, nullptr);
}

}  // namespace helium::cli
