// CPU decode and prefill speed of a Qwen3-0.6B-shaped model with random bf16 weights, beside the
// memory-bandwidth ceiling: decode must read every weight once per token (plus the KV cache), so
// tok/s <= measured read bandwidth / bytes read per token. Prints a table and writes JSON.
//
//   helium_bench_cpu_decode [--threads N] [--prompt 128] [--tokens 64] [--runs 3] [--json PATH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_cache.h"
#include "models/model.h"

namespace helium {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Read bandwidth: every thread sums its share of a 1 GiB buffer; best of 5 passes.
double measure_read_bandwidth(ThreadPool& pool) {
  const size_t n = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
  pool.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  double best = 0;
  std::vector<uint64_t> sums(pool.size() * 8);
  for (int pass = 0; pass < 5; ++pass) {
    double t0 = now_seconds();
    pool.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = b; i + 3 < e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      sums[(b * 8 / std::max<int64_t>(e - b, 1)) % sums.size()] += s0 + s1 + s2 + s3;
    });
    best = std::max(best, n * sizeof(uint64_t) / (now_seconds() - t0));
  }
  return best;
}

struct Tensors {
  std::vector<std::vector<uint16_t>> storage;
  WeightMap map;
  void add(const std::string& name, std::vector<int64_t> shape, std::mt19937_64& rng, float scale) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t> data(static_cast<size_t>(n));
    // Random bf16 in about [-scale, scale]: random mantissa and sign, exponent near scale's.
    const uint16_t base = static_cast<uint16_t>(f32_to_bf16(scale) & 0x7f80);
    for (auto& v : data) {
      uint64_t r = rng();
      v = static_cast<uint16_t>((base - 0x0080 * (r & 3)) | ((r >> 8) & 0x7f) | ((r >> 16) & 1) << 15);
    }
    WeightInfo w;
    w.name = name;
    w.file = "(random)";
    w.dtype = DType::BF16;
    w.shape = shape;
    w.data = data.data();
    w.bytes = data.size() * 2;
    map.add(w);
    storage.push_back(std::move(data));
  }
};

int main_impl(int argc, char** argv) {
  int threads = 0, prompt = 128, tokens = 64, runs = 3;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--threads") threads = std::stoi(argv[i + 1]);
    else if (a == "--prompt") prompt = std::stoi(argv[i + 1]);
    else if (a == "--tokens") tokens = std::stoi(argv[i + 1]);
    else if (a == "--runs") runs = std::stoi(argv[i + 1]);
    else if (a == "--json") json_path = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  // Qwen3-0.6B's shape (config.json of Qwen/Qwen3-0.6B).
  const int64_t vocab = 151936, hidden = 1024, inter = 3072, layers = 28, heads = 16, kv_heads = 8, head_dim = 128;
  Checkpoint ckpt;
  ckpt.dir = "(random Qwen3-0.6B shape)";
  ckpt.model_type = "qwen3";
  ckpt.config = {{"model_type", "qwen3"}, {"vocab_size", vocab}, {"hidden_size", hidden}, {"intermediate_size", inter},
                 {"num_hidden_layers", layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads},
                 {"head_dim", head_dim}, {"rope_theta", 1000000.0}, {"rms_norm_eps", 1e-6},
                 {"tie_word_embeddings", true}, {"max_position_embeddings", 40960}, {"hidden_act", "silu"}};
  Tensors t;
  std::mt19937_64 rng(42);
  t.add("model.embed_tokens.weight", {vocab, hidden}, rng, 0.05f);
  t.add("model.norm.weight", {hidden}, rng, 1.0f);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.add(p + "input_layernorm.weight", {hidden}, rng, 1.0f);
    t.add(p + "post_attention_layernorm.weight", {hidden}, rng, 1.0f);
    t.add(p + "self_attn.q_proj.weight", {heads * head_dim, hidden}, rng, 0.03f);
    t.add(p + "self_attn.k_proj.weight", {kv_heads * head_dim, hidden}, rng, 0.03f);
    t.add(p + "self_attn.v_proj.weight", {kv_heads * head_dim, hidden}, rng, 0.03f);
    t.add(p + "self_attn.o_proj.weight", {hidden, heads * head_dim}, rng, 0.03f);
    t.add(p + "self_attn.q_norm.weight", {head_dim}, rng, 1.0f);
    t.add(p + "self_attn.k_norm.weight", {head_dim}, rng, 1.0f);
    t.add(p + "mlp.gate_proj.weight", {inter, hidden}, rng, 0.03f);
    t.add(p + "mlp.up_proj.weight", {inter, hidden}, rng, 0.03f);
    t.add(p + "mlp.down_proj.weight", {hidden, inter}, rng, 0.03f);
  }
  ckpt.weights = std::move(t.map);

  CpuBackend backend(threads);
  ThreadPool pool(backend.threads());
  const double bandwidth = measure_read_bandwidth(pool);
  const int64_t context = prompt + tokens + 8;
  ModelOptions mo;
  mo.max_rows = std::min(prompt, 256);
  mo.max_context = context;
  auto model = load_model(ckpt, backend, mo);
  if (!model.is_ok()) {
    std::fprintf(stderr, "%s\n", model.error_message().c_str());
    return 1;
  }
  auto kv = KvCache::create(backend, model.value()->kv_spec(), context, DType::F32);
  if (!kv.is_ok()) {
    std::fprintf(stderr, "%s\n", kv.error_message().c_str());
    return 1;
  }
  Model& m = *model.value();
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::vector<double> prefill_tps, decode_tps;
  for (int run = 0; run <= runs; ++run) {  // run 0 warms up
    int32_t seq = kv.value()->new_sequence();
    double t0 = now_seconds();
    for (int begin = 0; begin < prompt; begin += mo.max_rows) {
      Batch b;
      int end = std::min(prompt, begin + mo.max_rows);
      for (int i = begin; i < end; ++i) b.add((i * 7919) % static_cast<int32_t>(vocab), i, seq, i + 1 == prompt);
      if (!kv.value()->plan(b).is_ok()) return 1;
      std::span<float> out = end == prompt ? std::span<float>(logits) : std::span<float>();
      if (!m.forward(b, kv.value()->layers(), out).is_ok()) return 1;
    }
    double t1 = now_seconds();
    for (int i = 0; i < tokens; ++i) {
      Batch b;
      int32_t token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      b.add(token, prompt + i, seq, true);
      if (!kv.value()->plan(b).is_ok()) return 1;
      if (!m.forward(b, kv.value()->layers(), logits).is_ok()) return 1;
    }
    double t2 = now_seconds();
    kv.value()->free_sequence(seq);
    if (run == 0) continue;
    prefill_tps.push_back(prompt / (t1 - t0));
    decode_tps.push_back(tokens / (t2 - t1));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // Bytes one decode step reads: every weight once (the tied embedding serves as the head; one embedding
  // row is negligible), plus K and V of the context (F32) for every layer, at the mean decode context.
  const double weight_bytes = static_cast<double>(m.info().weight_bytes);
  const double kv_bytes = 2.0 * layers * kv_heads * head_dim * 4 * (prompt + tokens / 2.0);
  const double ceiling = bandwidth / (weight_bytes + kv_bytes);
  const double decode = median(decode_tps), prefill = median(prefill_tps);
  std::printf("model     Qwen3-0.6B shape, random bf16 weights (%.1f M parameters, %.2f GB)\n", m.info().parameters / 1e6,
              weight_bytes / 1e9);
  std::printf("machine   %s, %d threads, read bandwidth %.1f GB/s (measured)\n", backend.name().c_str(),
              backend.threads(), bandwidth / 1e9);
  std::printf("decode    %.2f tok/s   ceiling %.2f tok/s (bandwidth / %.2f GB per token)   ratio %.2f   [%d tokens after a %d-token prompt, median of %d]\n",
              decode, ceiling, (weight_bytes + kv_bytes) / 1e9, decode / ceiling, tokens, prompt, runs);
  std::printf("prefill   %.1f tok/s   (%d-token prompt, median of %d)\n", prefill, prompt, runs);
  nlohmann::json j = {{"benchmark", "cpu_decode"},
                      {"model", "qwen3-0.6b-shape-random-bf16"},
                      {"backend", backend.name()},
                      {"threads", backend.threads()},
                      {"read_bandwidth_gbps", bandwidth / 1e9},
                      {"weight_bytes", weight_bytes},
                      {"decode_tok_s", decode},
                      {"decode_runs_tok_s", decode_tps},
                      {"decode_ceiling_tok_s", ceiling},
                      {"decode_ratio", decode / ceiling},
                      {"prefill_tok_s", prefill},
                      {"prefill_runs_tok_s", prefill_tps},
                      {"prompt_tokens", prompt},
                      {"decode_tokens", tokens}};
  if (!json_path.empty()) std::ofstream(json_path) << j.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace helium

int main(int argc, char** argv) { return helium::main_impl(argc, argv); }
