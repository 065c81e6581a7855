#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "loader/checkpoint.h"
#include "models/model.h"

namespace helium::cli {
namespace {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

// A backend that only counts: `info` plans the model without allocating or reading weight data.
class CountingBackend final : public Backend {
 public:
  size_t allocated = 0;
  std::string name() const override { return "plan"; }
  Result<std::shared_ptr<DeviceBuffer>> allocate(size_t bytes) override {
    allocated += bytes;
    struct Nothing final : DeviceBuffer {
      size_t n;
      explicit Nothing(size_t b) : n(b) {}
      void* data() override { return nullptr; }
      size_t bytes() const override { return n; }
    };
    return std::shared_ptr<DeviceBuffer>(std::make_shared<Nothing>(bytes));
  }
  Result<Tensor> import_weight(const Tensor& host) override { return host; }
  void copy_to_device(Tensor, const void*) override {}
  void copy_to_host(void*, const Tensor&) override {}
  void synchronize() override {}
  void embedding(const Tensor&, const Tensor&, Tensor) override {}
  void matmul(const Tensor&, const Tensor&, const Tensor&, Tensor) override {}
  void rms_norm(const Tensor&, const Tensor&, float, bool, Tensor) override {}
  void rope(Tensor, int, const Tensor&, const Tensor&, const RopeParams&) override {}
  void kv_write(const Tensor&, const Tensor&, const Tensor&, Tensor, Tensor) override {}
  void attention(const Tensor&, const Tensor&, const Tensor&, const AttentionShape&, const AttentionLayout&,
                 Tensor) override {}
  void swiglu(const Tensor&, const Tensor&, Tensor) override {}
  void add(const Tensor&, const Tensor&, Tensor) override {}
  void gather_rows(const Tensor&, const Tensor&, Tensor) override {}
  void copy_rows(Tensor, const Tensor&, const Tensor&) override {}
  void fill_random(Tensor, uint64_t, float, float) override {}
};

}  // namespace

void add_info_command(CLI::App& app, InfoOptions& o) {
  CLI::App* info = app.add_subcommand("info", "Print a model's architecture, parameter count and memory plan");
  info->add_option("-m,--model", o.model, "Model directory; default: the embedded model");
  info->add_option("-c,--ctx-size", o.context, "Context length to plan the KV cache for (0 = the model's, at most 32768)");
}

int info_command(const InfoOptions& o) {
  const std::string dir = o.model.empty() ? default_model_path() : o.model;
  auto ckpt = load_checkpoint(dir);
  if (!ckpt.is_ok()) {
    std::cerr << "helium: " << ckpt.error_message() << "\n";
    return 1;
  }
  for (const auto& w : ckpt->warnings) std::cerr << "helium: warning: " << w << "\n";
  const int64_t context = context_for(ckpt.value(), o.context);
  CountingBackend plan;
  ModelOptions mo;
  mo.max_context = context;
  auto model = load_model(ckpt.value(), plan, mo);
  if (!model.is_ok()) {
    std::cerr << "helium: " << model.error_message() << "\n";
    return 1;
  }
  const size_t activations = plan.allocated;
  const ModelInfo& m = model.value()->info();
  const KvSpec kv = model.value()->kv_spec();
  const double kv_bytes = 2.0 * kv.layers * kv.kv_dim * static_cast<double>(context) * 4;  // F32 on the CPU
  std::printf("model        %s\n", dir.c_str());
  std::printf("architecture %s: %d layers, hidden %lld, %d heads (%d KV) of %d, FFN %lld, vocab %lld\n",
              m.family.c_str(), m.layers, static_cast<long long>(m.hidden_size), m.n_heads, m.n_kv_heads, m.head_dim,
              static_cast<long long>(m.intermediate_size), static_cast<long long>(m.vocab_size));
  std::printf("parameters   %lld (%.3f B)\n", static_cast<long long>(m.parameters), m.parameters / 1e9);
  std::printf("memory plan (cpu, context %lld):\n", static_cast<long long>(context));
  std::printf("  weights      %s (%s, memory-mapped)\n", human_bytes(static_cast<double>(m.weight_bytes)).c_str(),
              m.weight_dtype.c_str());
  std::printf("  KV cache     %s (F32, %lld bytes per token)\n", human_bytes(kv_bytes).c_str(),
              static_cast<long long>(2LL * kv.layers * kv.kv_dim * 4));
  std::printf("  activations  %s (%d rows per forward)\n", human_bytes(static_cast<double>(activations)).c_str(),
              model.value()->max_rows());
  std::printf("  total        %s\n", human_bytes(m.weight_bytes + kv_bytes + static_cast<double>(activations)).c_str());
  return 0;
}

}  // namespace helium::cli
