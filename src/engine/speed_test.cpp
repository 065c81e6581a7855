// engine/speed_test.cpp — see speed_test.h.
#include "engine/speed_test.h"

#include <algorithm>
#include <cstdio>

namespace helium {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// `n` token ids spread over the vocabulary, different for every (salt, run): no run reuses another's KV.
std::vector<int32_t> pseudo_prompt(int64_t n, int64_t vocab, uint64_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t x = 0x9E3779B97F4A7C15ull * (salt + 1);
  for (int32_t& id : ids) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    id = static_cast<int32_t>((x * 0x2545F4914F6CDD1Dull >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

}  // namespace

double weight_bytes_read_per_token(const Checkpoint& checkpoint, const ModelInfo& info) {
  const WeightInfo* embed = checkpoint.weights.find("model.embed_tokens.weight");
  const bool tied = checkpoint.config.value("tie_word_embeddings", false);
  return static_cast<double>(info.weight_bytes) - (tied || embed == nullptr ? 0.0 : static_cast<double>(embed->bytes));
}

Result<SpeedTestResult> run_speed_test(Engine& engine, const SpeedTestOptions& o,
                                       const std::function<void(const std::string&)>& progress) {
  if (o.contexts.empty()) return Status::error("no context to measure decode at");
  if (o.decode_tokens < 2) return Status::error("decode needs at least 2 generated tokens (the first is prefill's)");
  if (o.runs < 1) return Status::error("at least one timed run is needed");
  const int64_t largest = *std::max_element(o.contexts.begin(), o.contexts.end());
  if (*std::min_element(o.contexts.begin(), o.contexts.end()) < 1) return Status::error("contexts must be at least 1 token");
  if (largest + o.decode_tokens > engine.context() || o.prefill_tokens + 1 > engine.context())
    return Status::error("the engine's context (" + std::to_string(engine.context()) + " tokens) cannot hold " +
                         std::to_string(std::max(largest + o.decode_tokens, o.prefill_tokens + 1)) + " tokens");
  SpeedTestResult r;
  HELIUM_ASSIGN_OR_RETURN(r.bandwidth, engine.measure_memory_bandwidth());
  const ModelInfo& info = engine.model().info();
  r.weight_bytes_per_token = weight_bytes_read_per_token(engine.checkpoint(), info);
  for (const LayerKv& layer : engine.kv_cache().layers())
    r.kv_bytes_per_position += static_cast<double>(layer.k.dim(-1)) * (dtype_bytes(layer.k.dtype) + dtype_bytes(layer.v.dtype));
  const int64_t vocab = info.vocab_size;
  uint64_t salt = 0;

  GenerationRequest request;
  request.sampling.temperature = 0;  // greedy: the device's argmax, as the protocol's figures are
  request.ignore_eos = true;
  for (int64_t context : o.contexts) {
    DecodeSpeed d;
    d.context = context;
    d.tokens = o.decode_tokens;
    for (int run = 0; run <= o.runs; ++run) {  // run 0 warms up
      request.prompt = pseudo_prompt(context, vocab, salt++);
      request.max_new_tokens = static_cast<int>(o.decode_tokens);
      HELIUM_ASSIGN_OR_RETURN(GenerationResult g, engine.generate(request));
      if (g.tokens.size() < 2 || g.decode_seconds <= 0) return Status::error("the decode run generated too few tokens");
      if (run > 0) d.runs_tok_s.push_back(static_cast<double>(g.tokens.size() - 1) / g.decode_seconds);
    }
    d.tok_s = median(d.runs_tok_s);
    const double mean_context = static_cast<double>(context) + static_cast<double>(o.decode_tokens) / 2;
    d.ceiling_tok_s = r.bandwidth.bytes_per_second / (r.weight_bytes_per_token + r.kv_bytes_per_position * mean_context);
    if (progress) {
      char line[160];
      std::snprintf(line, sizeof line, "decode  context %6lld: %9.2f tok/s   ceiling %9.2f tok/s   ratio %.3f",
                    static_cast<long long>(context), d.tok_s, d.ceiling_tok_s, d.tok_s / d.ceiling_tok_s);
      progress(line);
    }
    r.decode.push_back(std::move(d));
  }
  if (o.prefill_tokens > 0) {
    r.prefill_tokens = o.prefill_tokens;
    for (int run = 0; run <= o.runs; ++run) {
      request.prompt = pseudo_prompt(o.prefill_tokens, vocab, salt++);
      request.max_new_tokens = 1;
      HELIUM_ASSIGN_OR_RETURN(GenerationResult g, engine.generate(request));
      if (g.prefill_seconds <= 0) return Status::error("the prefill run took no time");
      if (run > 0) r.prefill_runs_tok_s.push_back(static_cast<double>(o.prefill_tokens) / g.prefill_seconds);
    }
    r.prefill_tok_s = median(r.prefill_runs_tok_s);
    if (progress) {
      char line[160];
      // Prefill is compute-bound: the figure beside it is the weight matmuls' FLOP rate (2 per weight).
      const double flops = 2.0 * static_cast<double>(info.parameters) * r.prefill_tok_s;
      std::snprintf(line, sizeof line, "prefill %6lld tokens: %9.1f tok/s   (%.1f %s in the weight matmuls)",
                    static_cast<long long>(o.prefill_tokens), r.prefill_tok_s, flops >= 1e12 ? flops / 1e12 : flops / 1e9,
                    flops >= 1e12 ? "TFLOP/s" : "GFLOP/s");
      progress(line);
    }
  }
  return r;
}

}  // namespace helium
