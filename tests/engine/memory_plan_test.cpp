// The memory plan: every component of a dense model (Qwen3-8B) and a hybrid MoE (Qwen3.6-35B-A3B) checked
// against sums worked out by hand from their config values; refusals that state the sizes and the flags
// that would help; expert offloading to host RAM and disk; shapes read from real config.json texts agree
// with the catalog; the engine's own KV and activation sizes reproduced exactly.
#include "backend/counting_backend.h"
#include "engine/memory_plan.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "hub/catalog.h"
#include "kv/kv_cache.h"
#include "loader/checkpoint.h"
#include "models/model.h"

namespace helium {
namespace {

const Catalog& catalog() {
  static const Catalog c = [] {
    auto r = Catalog::load(std::string(HELIUM_SOURCE_DIR) + "/catalog/models.json");
    EXPECT_TRUE(r.is_ok()) << r.error_message();
    return r.is_ok() ? r.value() : Catalog{};
  }();
  return c;
}

PlanModel from_catalog(const std::string& name) {
  const CatalogEntry& e = *catalog().find(name);
  PlanModel m;
  m.name = e.name;
  m.shape = e.shape;
  m.quantization = e.quantization;
  m.implemented = e.shape.family == "qwen3";
  m.drafter = e.drafter;
  if (!e.drafter.empty() && e.drafter != "mtp") m.drafter_shape = catalog().find(e.drafter)->shape;
  return m;
}

const PlanItem* item(const MemoryPlan& plan, const std::string& what) {
  for (const auto& i : plan.items)
    if (i.what == what) return &i;
  return nullptr;
}

// The CUDA reservations at 4096 rows and 32768 positions, as engine.cpp creates the backend for the
// model's own sizes: attention partials 64 rows x heads x 64 partitions (512 keys each past 16K keys) x
// (head_dim + 2) floats, a bf16
// copy of 4096 rows of the widest matmul input, the 32 MiB cuBLASLt workspace, and argmax_rows' 8-byte
// key per row. Qwen3-8B: 32 heads of 128, widest input 12288; Qwen3.6-35B-A3B: 16 heads of 256, widest
// input 16 x 256.
// Attention partials, the bf16 prefill input, cuBLASLt, argmax keys, select_candidates' 2 x 64 x 256 words
// and 64 x 256 group sums (doubles), the fused attention's 64 x heads counters.
constexpr int64_t kScratch8B = 64LL * 32 * 64 * 130 * 4 + 4096LL * 12288 * 2 + (32LL << 20) + 4096 * 8 +
                               2 * 64 * 256 * 4 + 64 * 256 * 8 + 64 * 32 * 4;
constexpr int64_t kScratch35B = 64LL * 16 * 64 * 258 * 4 + 4096LL * 4096 * 2 + (32LL << 20) + 4096 * 8 +
                                2 * 64 * 256 * 4 + 64 * 256 * 8 + 64 * 16 * 4;
// Sampling candidates of the 64 logit rows: 2,048 (x, id) pairs, 4 words (temperature, top_k, count, valid)
// and the softmax total (a double).
constexpr int64_t kCandidates = 64LL * (2048 * 8 + 24);
constexpr int64_t kReserved = 1LL << 30;

TEST(MemoryPlan, DenseQwen3_8BOnAnH200ByHand) {
  MemoryPlanOptions o;
  o.context = 32768;
  o.drafter = false;
  const MemoryPlan plan = plan_memory(from_catalog("8b"), o);
  // Weights: 8,190,726,144 parameters (catalog_test works them out) x 2 bytes.
  EXPECT_EQ(plan.weight_bytes, 16381452288);
  EXPECT_EQ(plan.expert_bytes, 0);
  // KV: 2 (K and V) x 36 layers x 8 KV heads x 128 x 2 bytes = 147,456 bytes a token; KvCache holds
  // 32,768 positions in whole pages plus 64 tree-scratch slots.
  EXPECT_EQ(plan.kv_bytes_per_token, 147456);
  EXPECT_EQ(plan.kv_bytes, (32768 + 64) * 147456LL + 512);  // + the 2 x 64 I32 slot-move table
  EXPECT_EQ(plan.recurrent_bytes, 0);
  // Activations, 4096 rows: (2 x 4096 hidden + 2 x 4096 q/attn + 2 x 1024 k/v + 2 x 12288 gate/up) floats a
  // row; logits for 64 rows of 151,936 and their 64 argmax ids; 64 RoPE frequencies; 9 row-metadata words a
  // row; block tables of 32768/16 + 1 pages a row; the sampling candidates.
  const int64_t activations = 4096LL * (8192 + 8192 + 2048 + 24576) * 4 + 64LL * 151936 * 4 + 64 * 4 + 64 * 4 +
                              4096LL * 36 + 4096LL * 2049 * 4 + kCandidates;
  EXPECT_EQ(activations, 778307584);
  EXPECT_EQ(plan.activation_bytes, activations);
  EXPECT_FALSE(plan.activations_estimated);
  EXPECT_EQ(plan.backend_scratch_bytes, kScratch8B);
  EXPECT_EQ(plan.gpu_total, 16381452288 + 4841275392 + 512 + activations + kScratch8B + kReserved);
  EXPECT_EQ(plan.gpu_total, 23277447680 + 64 * 32 * 4);
  EXPECT_TRUE(plan.fits);
  EXPECT_EQ(plan.gpu_budget, 141000000000);

  // The recommended drafter (Qwen3-0.6B) adds its weights, its KV for the same context and its activations.
  o.drafter = true;
  const MemoryPlan drafted = plan_memory(from_catalog("8b"), o);
  const ModelShape& d = catalog().find("0.6b")->shape;
  EXPECT_EQ(drafted.drafter_bytes, parameter_breakdown(d).total() * 2 +
                                       (32768 + 64) * 2LL * 28 * 8 * 128 * 2 + 512 +
                                       dense_activation_bytes(d, 4096, 32768, 128));
  EXPECT_EQ(drafted.gpu_total, plan.gpu_total + drafted.drafter_bytes);
}

// HELIUM_CUDA_ATTN_PARTITIONS changes how many partials the backend reserves; the plan counts them by the
// same tiers. 64-key partitions everywhere: 512 of them at 32K keys instead of 64; a malformed value gives
// the default count (the backend refuses it when it starts).
TEST(MemoryPlan, AttentionPartialsFollowThePartitionOverride) {
  struct Restore {
    ~Restore() { unsetenv("HELIUM_CUDA_ATTN_PARTITIONS"); }
  } restore;
  MemoryPlanOptions o;
  o.context = 32768;
  o.drafter = false;
  setenv("HELIUM_CUDA_ATTN_PARTITIONS", "65536,65536", 1);
  const MemoryPlan fine = plan_memory(from_catalog("8b"), o);
  EXPECT_EQ(fine.backend_scratch_bytes, kScratch8B + 64LL * 32 * (512 - 64) * 130 * 4);
  setenv("HELIUM_CUDA_ATTN_PARTITIONS", "0,0,0", 1);  // 512-key partitions from the first key: still 64
  EXPECT_EQ(plan_memory(from_catalog("8b"), o).backend_scratch_bytes, kScratch8B);
  setenv("HELIUM_CUDA_ATTN_PARTITIONS", "65536", 1);
  EXPECT_EQ(plan_memory(from_catalog("8b"), o).backend_scratch_bytes, kScratch8B);
}

TEST(MemoryPlan, HybridMoeQwen36_35BOnAnH200ByHand) {
  MemoryPlanOptions o;
  o.context = 32768;
  const MemoryPlan plan = plan_memory(from_catalog("35b"), o);
  // Weights: the text model's 34,660,523,648 parameters x 2 bytes; of which routed experts 40 layers x 256
  // experts x 3 x 2048 x 512 x 2 bytes.
  EXPECT_EQ(plan.weight_bytes, 69321047296);
  EXPECT_EQ(plan.expert_bytes, 40LL * 256 * 3 * 2048 * 512 * 2);
  // KV only for the 10 full-attention layers: 2 x 10 x 2 KV heads x 256 x 2 bytes = 20,480 bytes a token.
  EXPECT_EQ(plan.kv_bytes_per_token, 20480);
  EXPECT_EQ(plan.kv_bytes, (32768 + 64) * 20480LL + 512);
  // Recurrent state: 30 Gated DeltaNet layers x (32 value heads x 128 x 128 fp32 + a conv window of
  // 8192 channels x 3 bf16), kept in 1 + 4 snapshots (the MTP drafter proposes 4 tokens a step).
  EXPECT_EQ(plan.recurrent_bytes, 30LL * (32 * 128 * 128 * 4 + 8192 * 3 * 2) * 5);
  EXPECT_EQ(plan.recurrent_bytes, 321945600);
  // Activations: an estimate (the family is not built): the dense buffers plus, per row, the output gate
  // (4096), Gated DeltaNet (2 x 8192 + 2 x 4096 + 64) and MoE (256 router + 8 x 1024 + 1024 shared +
  // 9 x 2048 outputs + 16 routing) floats.
  EXPECT_TRUE(plan.activations_estimated);
  EXPECT_EQ(plan.activation_bytes, 4096LL * (4096 + 8192 + 1024) * 4 + 64LL * 248320 * 4 + 64 * 4 + 128 * 4 +
                                       4096LL * 36 + 4096LL * 2049 * 4 + kCandidates +
                                       4096LL * (4096 + 24640 + 27920) * 4);
  // The MTP drafter: fc 2 x 2048^2, 3 norms, one gated-attention layer (27,262,976), 2 norms, one MoE layer
  // (3 x 2048 x (256 x 512 + 512) + the 256 x 2048 router), in bf16; and its one layer of KV.
  const int64_t mtp =
      2LL * 2048 * 2048 + 3 * 2048 + 27262976 + 2 * 2048 + 3LL * 2048 * (256 * 512 + 512) + 256 * 2048;
  EXPECT_EQ(mtp, 844638208);
  EXPECT_EQ(plan.drafter_bytes, mtp * 2 + (32768 + 64) * 2LL * 1 * 2 * 256 * 2);
  EXPECT_EQ(plan.gpu_total, 69321047296 + 672399360 + 512 + 321945600 + plan.activation_bytes +
                                plan.drafter_bytes + kScratch35B + kReserved);
  EXPECT_EQ(plan.gpu_total, 74525382656 + 64 * 16 * 4);
  EXPECT_TRUE(plan.fits);
  ASSERT_NE(item(plan, "routed experts"), nullptr);
  EXPECT_EQ(item(plan, "routed experts")->where, Placement::Gpu);
}

TEST(MemoryPlan, RefusalStatesTheSizesAndTheFlagsThatWouldHelp) {
  // Qwen3.5-122B-A10B in bf16 (244 GB of weights) on one H200: no context makes it fit; FP8 weights or
  // offloaded experts would.
  MemoryPlanOptions o;
  o.context = 32768;
  MemoryPlan plan = plan_memory(from_catalog("flash-next"), o);
  EXPECT_FALSE(plan.fits);
  const std::string& r = plan.refusal;
  EXPECT_NE(r.find("flash-next does not fit on H200 (141.0 GB)"), std::string::npos) << r;
  EXPECT_NE(r.find("needs " + std::string("2")), std::string::npos) << r;  // "it needs 2xx.x GB"
  EXPECT_NE(r.find("weights 244."), std::string::npos) << r;
  EXPECT_NE(r.find("--offload-experts"), std::string::npos) << r;
  EXPECT_NE(r.find("--quantization fp8"), std::string::npos) << r;
  EXPECT_EQ(r.find("--ctx-size"), std::string::npos) << r;  // the weights alone are too large

  // With the experts offloaded (host RAM unknown: not checked), the GPU keeps the rest and a cache of
  // whole experts.
  o.offload_experts = true;
  plan = plan_memory(from_catalog("flash-next"), o);
  EXPECT_TRUE(plan.fits) << plan.refusal;
  EXPECT_EQ(plan.experts_on_gpu + plan.experts_on_host + plan.experts_on_disk, plan.expert_bytes);
  EXPECT_GT(plan.experts_on_gpu, 0);
  EXPECT_LE(plan.gpu_total, plan.gpu_budget);
  const int64_t per_expert = 3LL * 3072 * 1024 * 2;
  EXPECT_EQ(plan.experts_on_gpu % per_expert, 0);           // whole experts only
  EXPECT_LT(plan.gpu_budget - plan.gpu_total, per_expert);  // and as many as fit

  // With 100 GB of host RAM (4 GiB kept for the system), what does not fit there streams from disk.
  o.host_bytes = 100'000'000'000;
  plan = plan_memory(from_catalog("flash-next"), o);
  EXPECT_TRUE(plan.fits);
  EXPECT_GT(plan.experts_on_disk, 0);
  EXPECT_EQ(plan.host_total, plan.host_budget);
  ASSERT_FALSE(plan.notes.empty());
  EXPECT_NE(plan.notes[0].find("SSD"), std::string::npos);
}

TEST(MemoryPlan, ASmallerContextIsSuggestedWhenItIsEnough) {
  // Qwen3-32B (65.5 GB of weights) on a 79 GB GPU at its full 40,960 positions: a shorter context fits.
  MemoryPlanOptions o;
  o.context = 40960;
  o.gpu_bytes = 79'000'000'000;
  o.device_name = "GPU";
  o.drafter = false;
  const MemoryPlan plan = plan_memory(from_catalog("flint"), o);
  ASSERT_FALSE(plan.fits);
  const std::string& r = plan.refusal;
  EXPECT_NE(r.find("flint does not fit on GPU (79.00 GB): it needs 79.16 GB"), std::string::npos) << r;
  EXPECT_NE(r.find("KV cache 10.7"), std::string::npos) << r;  // 40,960 x 262,144 bytes
  const auto at = r.find("--ctx-size ");
  ASSERT_NE(at, std::string::npos) << r;
  const int64_t suggested = std::stoll(r.substr(at + 11));
  EXPECT_EQ(suggested % 1024, 0);
  MemoryPlanOptions t = o;
  t.context = suggested;
  EXPECT_TRUE(plan_memory(from_catalog("flint"), t).fits);
  t.context = suggested + 1024;
  EXPECT_FALSE(plan_memory(from_catalog("flint"), t).fits);
}

TEST(MemoryPlan, CpuPlanKeepsEverythingOnTheHost) {
  MemoryPlanOptions o;
  o.gpu = false;
  o.context = 2048;
  o.host_bytes = 16'000'000'000;
  const MemoryPlan plan = plan_memory(from_catalog("helium-code-12m"), o);
  EXPECT_TRUE(plan.fits);
  EXPECT_EQ(plan.gpu_total, 0);
  EXPECT_EQ(plan.kv_element_bytes, 4);  // F32 KV on the CPU
  EXPECT_EQ(plan.rows_per_forward, 256);
  EXPECT_EQ(plan.kv_bytes, (2048 + 64) * 2LL * 6 * 2 * 64 * 4 + 512);
  for (const auto& i : plan.items) EXPECT_EQ(i.where, Placement::Host) << i.what;
  o.host_bytes = 4'500'000'000;  // 0.5 GB to spare after the 4 GB kept for the system
  o.context = 1 << 20;           // KV of 6.4 GB cannot be mapped from disk
  EXPECT_FALSE(plan_memory(from_catalog("helium-code-12m"), o).fits);
}

// The plan reproduces the engine's own sizes: KvCache::bytes(), and the activation buffers the dense
// transformer plans (counted through a backend that allocates nothing).

TEST(MemoryPlan, ReproducesTheEngineKvAndActivationSizes) {
  const std::string dir = std::string(HELIUM_SOURCE_DIR) + "/models/helium-code-12m";
  auto ckpt = load_checkpoint(dir);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.error_message();
  auto shape = model_shape_from_config(ckpt->config, dir);
  ASSERT_TRUE(shape.is_ok()) << shape.error_message();
  for (int64_t context : {100, 2048}) {
    for (int rows : {1, 37, 256}) {
      CountingBackend counter;
      ModelOptions mo;
      mo.max_rows = rows;
      mo.max_context = context;
      auto model = load_model(ckpt.value(), counter, mo);
      ASSERT_TRUE(model.is_ok()) << model.error_message();
      EXPECT_EQ(dense_activation_bytes(shape.value(), rows, context, 64),
                static_cast<int64_t>(counter.allocated))
          << "rows " << rows << ", context " << context;
    }
    auto cpu = CpuBackend::create(1);
    ASSERT_TRUE(cpu.is_ok());
    auto kv = KvCache::create(*cpu.value(), KvSpec{6, 2 * 64}, context, DType::F32);
    ASSERT_TRUE(kv.is_ok());
    EXPECT_EQ(kv_cache_bytes(shape.value(), context, 4), static_cast<int64_t>(kv.value()->bytes()))
        << context;
  }
}

// Shapes read from real config.json texts (as published with the checkpoints) equal the catalog's facts.
TEST(MemoryPlan, ShapesFromRealConfigsMatchTheCatalog) {
  const nlohmann::json nemotron = nlohmann::json::parse(R"({
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "intermediate_size": 1856, "mamba_head_dim": 64, "mamba_num_heads": 64, "max_position_embeddings": 262144,
    "mlp_hidden_act": "relu2", "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712,
    "n_group": 1, "n_groups": 8, "n_routed_experts": 128, "n_shared_experts": 1, "num_attention_heads": 32,
    "num_experts_per_tok": 6, "num_hidden_layers": 52, "num_key_value_heads": 2, "head_dim": 128,
    "ssm_state_size": 128, "conv_kernel": 4, "tie_word_embeddings": false, "vocab_size": 131072})");
  const nlohmann::json llada = nlohmann::json::parse(R"({
    "model_type": "llada2_moe", "first_k_dense_replace": 1, "head_dim": 128, "hidden_size": 2048,
    "intermediate_size": 5120, "max_position_embeddings": 32768, "moe_intermediate_size": 512, "n_group": 8,
    "num_attention_heads": 16, "num_experts": 256, "num_experts_per_tok": 8, "num_hidden_layers": 20,
    "num_key_value_heads": 4, "num_shared_experts": 1, "tie_word_embeddings": false, "vocab_size": 157184})");
  nlohmann::json qwen36_27b = nlohmann::json::parse(R"({
    "model_type": "qwen3_5_text", "attn_output_gate": true, "full_attention_interval": 4, "head_dim": 256,
    "hidden_size": 5120, "intermediate_size": 17408, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1, "num_attention_heads": 24,
    "num_hidden_layers": 64, "num_key_value_heads": 4, "tie_word_embeddings": false, "vocab_size": 248320})");
  struct Case {
    const char* entry;
    const nlohmann::json* config;
  };
  for (const Case& c : {Case{"bolt", &nemotron}, Case{"clover", &llada}, Case{"27b", &qwen36_27b}}) {
    auto shape = model_shape_from_config(*c.config, c.entry);
    ASSERT_TRUE(shape.is_ok()) << shape.error_message();
    const ModelShape& got = shape.value();
    const ModelShape& want = catalog().find(c.entry)->shape;
    EXPECT_EQ(parameter_breakdown(got).total(), parameter_breakdown(want).total()) << c.entry;
    EXPECT_EQ(got.layers, want.layers) << c.entry;
    EXPECT_EQ(got.attention.layers, want.attention.layers) << c.entry;
    EXPECT_EQ(got.recurrent.layers, want.recurrent.layers) << c.entry;
    EXPECT_EQ(got.recurrent.state_bytes_per_layer(), want.recurrent.state_bytes_per_layer()) << c.entry;
    EXPECT_EQ(got.moe.layers, want.moe.layers) << c.entry;
    EXPECT_EQ(got.ffn.layers, want.ffn.layers) << c.entry;
    EXPECT_EQ(got.mtp_layers, want.mtp_layers) << c.entry;
  }
  nlohmann::json unknown = {{"model_type", "mamba"}, {"hidden_size", 1}, {"vocab_size", 1}};
  auto bad = model_shape_from_config(unknown, "x/config.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error_message().find("no shape rules for model_type 'mamba'"), std::string::npos);
  nlohmann::json missing = {{"model_type", "qwen3"}, {"hidden_size", 64}, {"vocab_size", 10}};
  EXPECT_NE(model_shape_from_config(missing, "y/config.json").error_message().find("num_hidden_layers"),
            std::string::npos);
}

TEST(MemoryPlan, ByteSizes) {
  EXPECT_EQ(parse_byte_size("141GB").value(), 141000000000);
  EXPECT_EQ(parse_byte_size("141 gb").value(), 141000000000);
  EXPECT_EQ(parse_byte_size("80GiB").value(), 80LL << 30);
  EXPECT_EQ(parse_byte_size("1.5TB").value(), 1500000000000);
  EXPECT_EQ(parse_byte_size("512MiB").value(), 512LL << 20);
  EXPECT_EQ(parse_byte_size("64G").value(), 64000000000);
  EXPECT_EQ(parse_byte_size("123456").value(), 123456);
  for (const char* bad : {"", "GB", "12XB", "1.2.3GB", "-5GB", "0"})
    EXPECT_FALSE(parse_byte_size(bad).is_ok()) << bad;
}

}  // namespace
}  // namespace helium
