// Decode and prefill speed of a model shape with deterministic dummy weights (--load-format dummy), beside
// the memory-bandwidth ceiling (DESIGN.md's benchmark protocol): a decode step reads every weight once
// (the embedding table only as the head when tied) plus the K/V of its context, so
//   ceiling tok/s = measured bandwidth / (weight bytes + KV bytes at that context).
// Bandwidth: on CUDA a device-to-device copy (bytes read + written per second); on the CPU a
// multi-threaded read. Medians of --runs after one warm-up. Prints a table and writes JSON.
//
//   helium_bench_decode [--device cpu|cuda] [--config DIR] [--contexts 1024,8192,32768] [--tokens 512]
//                       [--prefill 4096] [--chunk ROWS] [--runs 3] [--threads N] [--json PATH]
//                       [--host-argmax 1] [--sample TEMPERATURE,TOP_P[,TOP_K]] [--batch N] [--pipeline 1]
// Greedy tokens come from the device's argmax (one id copied per step, as the engine does for greedy
// requests), each step after the previous one's id has come back; --pipeline 1 queues each step before
// the previous one's id has come back, reading its token where that argmax was taken, as the engine's
// pipelined decode does (EngineOptions::pipeline, the engine's default with CUDA; greedy on the device's
// argmax only; the protocol keeps the waiting loop, comparable across sessions); --host-argmax 1
// copies the logits every step and takes the argmax on the host instead;
// --sample draws each token on the host with philox_uniform(1, position) as the engine does for a sampled
// request: with TOP_K 1..256 or without TOP_K from the candidates the device selects (sample_from_candidates;
// without TOP_K the best 256 and the row's softmax total, the logits copied when the draw reaches past
// them — dummy weights give flat rows, so top_p 0.95 does at every step; a low temperature makes them
// peaked, as a trained model's are), else from copied logits (sample_token).
// --batch N (1..64, greedy only): N sequences of each context decoded together, one row each per step (the
// engine's batched decode, and the row counts of tree verification); tok/s counts every row's token, and
// the ceiling is N tokens per read of the weights plus N contexts of K/V.
#include <algorithm>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "engine/speed_test.h"
#include "kv/kv_cache.h"
#include "loader/checkpoint.h"
#include "models/model.h"
#include "sample/philox.h"
#include "sample/sampler.h"
#if HELIUM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace helium {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

struct Runner {
  Model& model;
  KvCache& kv;
  Backend& backend;
  bool host_argmax;  // copy every step's logits and take the argmax here (--host-argmax), or read the
                     // device's argmax (Model ForwardOutputs::argmax; what the engine does for greedy)
  bool pipeline;     // greedy steps queued one ahead (--pipeline; EngineOptions::pipeline)
  std::vector<float> logits;
  int32_t next = 0;  // the greedy token of the last forward
  std::optional<SamplingParams> sampling = std::nullopt;  // --sample
  SamplerScratch scratch = {};
  std::vector<float> cand_x = {};
  std::vector<int32_t> cand_ids = {};
  int64_t draws = 0;        // sampled draws through the device's candidates (prefill's last token included)
  int64_t logit_draws = 0;  // of those, the ones the candidates could not decide (the logits copied after all)

  Status forward_last(const Batch& b) {
    if (sampling) {  // as the engine does: candidates selected on the device when top_k allows, else logits
      const auto position = static_cast<uint64_t>(b.positions.back()) + 1;  // where the drawn token goes
      const double u = philox_uniform(1, position);
      if (sampling->device_candidates(Backend::kMaxSelectTopK)) {
        const float temperature = sampling->temperature;
        const int32_t top_k = sampling->top_k > 0 ? sampling->top_k : Backend::kMaxSelectTopK;
        cand_x.resize(kMaxCandidates);
        cand_ids.resize(kMaxCandidates);
        int32_t count = 0, valid = 0;
        double total = 0;
        const CandidateOutputs cand{{&temperature, 1}, {&top_k, 1}, cand_x,   cand_ids,
                                    {&count, 1},       {&valid, 1}, sampling->top_k > 0 ? std::span<double>() : std::span(&total, 1)};
        HELIUM_RETURN_IF_ERROR(model.forward(b, kv.layers(), ForwardOutputs{{}, {}, cand}));
        ++draws;
        if (count <= kMaxCandidates) {  // else the set did not fit
          const auto n = static_cast<size_t>(count);
          const RowCandidates set{std::span(cand_x).first(n), std::span(cand_ids).first(n), valid, top_k, total};
          next = sample_from_candidates(set, *sampling, u, static_cast<int32_t>(logits.size()), scratch);
          if (next >= 0) return Status::ok();
        }
        ++logit_draws;
        HELIUM_RETURN_IF_ERROR(model.last_logits(0, logits));  // past the candidates, or a set too large
      } else {
        HELIUM_RETURN_IF_ERROR(model.forward(b, kv.layers(), logits));
      }
      next = sample_token(logits, *sampling, {}, 0, u, scratch);
      return Status::ok();
    }
    if (host_argmax) {
      HELIUM_RETURN_IF_ERROR(model.forward(b, kv.layers(), logits));
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      return Status::ok();
    }
    return model.forward(b, kv.layers(), ForwardOutputs{{}, std::span<int32_t>(&next, 1)});
  }

  // Prefills `n` pseudo-random tokens into a new sequence; returns the sequence.
  Result<int32_t> prefill(int64_t n) {
    const int32_t seq = kv.new_sequence();
    const int64_t vocab = model.info().vocab_size;
    logits.resize(static_cast<size_t>(vocab));
    for (int64_t begin = 0; begin < n; begin += model.max_rows()) {
      const int64_t end = std::min<int64_t>(n, begin + model.max_rows());
      Batch b;
      for (int64_t i = begin; i < end; ++i)
        b.add(static_cast<int32_t>((i * 7919 + 13) % vocab), static_cast<int32_t>(i), seq, i + 1 == n);
      HELIUM_RETURN_IF_ERROR(kv.plan(b));
      if (end == n) HELIUM_RETURN_IF_ERROR(forward_last(b));
      else HELIUM_RETURN_IF_ERROR(model.forward(b, kv.layers(), std::span<float>()));
    }
    return seq;
  }
  // Greedy-decodes `tokens` more tokens of each of `seqs` together (one row each per step), starting from
  // `next_rows` (each sequence's token after its prefill; each step's argmax is written back into it).
  Status decode_batch(const std::vector<int32_t>& seqs, std::vector<int32_t> next_rows, int64_t tokens) {
    if (pipeline) return decode_pipelined(seqs, next_rows, tokens);
    for (int64_t i = 0; i < tokens; ++i) {
      Batch b;
      for (size_t s = 0; s < seqs.size(); ++s)
        b.add(next_rows[s], static_cast<int32_t>(kv.length(seqs[s])), seqs[s], true);
      HELIUM_RETURN_IF_ERROR(kv.plan(b));
      HELIUM_RETURN_IF_ERROR(model.forward(b, kv.layers(), ForwardOutputs{{}, std::span<int32_t>(next_rows)}));
    }
    return Status::ok();
  }
  // Greedy decode with each step queued before the previous one's ids are read (as Engine::pipelined_step
  // does): step i's rows take their tokens from step i - 1's argmax on the device (Batch::token_sources),
  // then step i - 1's ids are collected. `next_rows` ends as the last step's ids.
  Status decode_pipelined(const std::vector<int32_t>& seqs, std::vector<int32_t>& next_rows, int64_t tokens) {
    const size_t n = seqs.size();
    std::vector<int32_t> ids[2] = {std::vector<int32_t>(n), std::vector<int32_t>(n)};
    for (int64_t i = 0; i < tokens; ++i) {
      Batch b;
      for (size_t s = 0; s < n; ++s) b.add(next_rows[s], static_cast<int32_t>(kv.length(seqs[s])), seqs[s], true);
      if (i > 0)
        for (size_t s = 0; s < n; ++s) b.token_sources.push_back(static_cast<int32_t>(s));
      HELIUM_RETURN_IF_ERROR(kv.plan(b));
      ForwardOutputs out{{}, ids[i % 2]};
      out.deferred = true;
      HELIUM_RETURN_IF_ERROR(model.forward(b, kv.layers(), out));
      if (i > 0) {
        HELIUM_RETURN_IF_ERROR(model.collect());
        next_rows = ids[(i - 1) % 2];
      }
    }
    HELIUM_RETURN_IF_ERROR(model.collect());
    if (tokens > 0) next_rows = ids[(tokens - 1) % 2];
    return Status::ok();
  }
  // Greedy-decodes `tokens` more tokens of `seq`.
  Status decode(int32_t seq, int64_t tokens) {
    if (pipeline) {
      std::vector<int32_t> next_rows = {next};
      HELIUM_RETURN_IF_ERROR(decode_pipelined({seq}, next_rows, tokens));
      next = next_rows[0];
      return Status::ok();
    }
    for (int64_t i = 0; i < tokens; ++i) {
      Batch b;
      b.add(next, static_cast<int32_t>(kv.length(seq)), seq, true);
      HELIUM_RETURN_IF_ERROR(kv.plan(b));
      HELIUM_RETURN_IF_ERROR(forward_last(b));
    }
    return Status::ok();
  }
};

int run(int argc, char** argv) {
  std::string device = "cpu", config = std::string(HELIUM_SOURCE_DIR) + "/bench/configs/qwen3-0.6b", json_path;
  std::string contexts_arg;
  int64_t tokens = -1, prefill_tokens = -1;
  int runs = 3, threads = 0, chunk = -1, batch = 1;
  bool host_argmax = false, pipeline = false;
  std::optional<SamplingParams> sampling;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--device") device = v;
    else if (a == "--config") config = v;
    else if (a == "--contexts") contexts_arg = v;
    else if (a == "--tokens") tokens = std::stoll(v);
    else if (a == "--prefill") prefill_tokens = std::stoll(v);
    else if (a == "--runs") runs = std::stoi(v);
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--chunk") chunk = std::stoi(v);
    else if (a == "--json") json_path = v;
    else if (a == "--host-argmax") host_argmax = v == "1";
    else if (a == "--batch") batch = std::stoi(v);
    else if (a == "--pipeline") pipeline = v == "1";
    else if (a == "--sample") {
      SamplingParams sp;
      int top_k = 0;
      if (std::sscanf(v.c_str(), "%f,%f,%d", &sp.temperature, &sp.top_p, &top_k) < 2 || sp.temperature <= 0) {
        std::fprintf(stderr, "--sample wants TEMPERATURE,TOP_P[,TOP_K] with a temperature above 0\n");
        return 2;
      }
      sp.top_k = top_k;
      sampling = sp;
    }
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (batch < 1 || batch > 64 || (batch > 1 && (sampling || host_argmax))) {
    std::fprintf(stderr, "--batch wants 1..64 rows, greedy with the device's argmax (no --sample, --host-argmax)\n");
    return 2;
  }
  if (pipeline && (sampling || host_argmax)) {
    std::fprintf(stderr, "--pipeline 1 queues greedy steps on the device's argmax (no --sample, --host-argmax)\n");
    return 2;
  }
  const bool cuda = device == "cuda";
  // Defaults follow the protocol on a GPU; the CPU runs a short version that ends in about a minute.
  std::vector<int64_t> contexts = parse_list(contexts_arg.empty() ? (cuda ? "1024,8192,32768" : "128") : contexts_arg);
  if (tokens < 0) tokens = cuda ? 512 : 32;
  if (prefill_tokens < 0) prefill_tokens = cuda ? 4096 : 128;
  // Rows per prefill forward: whole 4K prompts on the GPU (large GEMMs), 256 on the CPU.
  if (chunk < 0) chunk = cuda ? 4096 : 256;
  const int64_t max_context = std::max(*std::max_element(contexts.begin(), contexts.end()) + tokens, prefill_tokens) + 16;
  const int64_t kv_positions = std::max(batch * (max_context + 64), max_context);  // --batch: every sequence at once

  auto ckpt = load_checkpoint(config, LoadFormat::Dummy);
  if (!ckpt.is_ok()) {
    std::fprintf(stderr, "%s\n", ckpt.error_message().c_str());
    return 1;
  }
  std::unique_ptr<Backend> backend;
#if HELIUM_HAVE_CUDA
  if (cuda) {
    CudaBackendOptions co;
    co.max_context = max_context;
    co.max_rows = chunk;
    auto b = CudaBackend::create(co);
    if (!b.is_ok()) {
      std::fprintf(stderr, "%s\n", b.error_message().c_str());
      return 1;
    }
    backend = std::move(b).value();
  }
#endif
  if (!cuda) {
    auto b = CpuBackend::create(threads);
    if (!b.is_ok()) {
      std::fprintf(stderr, "%s\n", b.error_message().c_str());
      return 1;
    }
    backend = std::move(b).value();
  }
  if (backend == nullptr) {
    std::fprintf(stderr, "device %s is not available in this build\n", device.c_str());
    return 1;
  }
  auto measured = backend->measure_memory_bandwidth();
  if (!measured.is_ok()) {
    std::fprintf(stderr, "%s\n", measured.error_message().c_str());
    return 1;
  }
  const double bandwidth = measured->bytes_per_second;
  const std::string bandwidth_kind = measured->method;
  const DType kv_dtype = cuda ? DType::BF16 : DType::F32;
  ModelOptions mo;
  mo.max_rows = chunk;
  mo.max_context = max_context;
  mo.kv_dtype = kv_dtype;
  auto model = load_model(ckpt.value(), *backend, mo);
  if (!model.is_ok()) {
    std::fprintf(stderr, "%s\n", model.error_message().c_str());
    return 1;
  }
  auto kv = KvCache::create(*backend, model.value()->kv_spec(), kv_positions, kv_dtype);
  if (!kv.is_ok()) {
    std::fprintf(stderr, "%s\n", kv.error_message().c_str());
    return 1;
  }
  Model& m = *model.value();
  Runner runner{m, *kv.value(), *backend, host_argmax, pipeline, std::vector<float>(static_cast<size_t>(m.info().vocab_size)),
                0, sampling};
  const ModelInfo& info = m.info();
  const KvSpec spec = m.kv_spec();
  const double weight_bytes = weight_bytes_read_per_token(ckpt.value(), info);
  const double kv_bytes_per_position = 2.0 * spec.layers * spec.kv_dim * dtype_bytes(kv_dtype);

  std::printf("model     %s shape (%s), dummy %s weights: %.2f B parameters, %.2f GB read per token\n",
              info.family.c_str(), config.c_str(), info.weight_dtype.c_str(), info.parameters / 1e9, weight_bytes / 1e9);
  std::printf("device    %s; bandwidth %.1f GB/s (%s)\n", backend->name().c_str(), bandwidth / 1e9, bandwidth_kind.c_str());
  nlohmann::json j = {{"benchmark", "decode"}, {"device", backend->name()}, {"config", config},
                      {"parameters", info.parameters}, {"weight_bytes_per_token", weight_bytes},
                      {"bandwidth_gbps", bandwidth / 1e9}, {"bandwidth_kind", bandwidth_kind},
                      {"kv_dtype", std::string(dtype_name(kv_dtype))}, {"runs", runs}, {"batch", batch},
                      {"greedy_token", sampling      ? (sampling->device_candidates(Backend::kMaxSelectTopK)
                                                            ? "sampled on the host from device-selected candidates (--sample)"
                                                            : "sampled on the host from copied logits (--sample)")
                                       : host_argmax ? "host argmax of copied logits"
                                       : pipeline    ? "device argmax, steps queued one ahead"
                                                     : "device argmax"},
                      {"decode", nlohmann::json::array()}};

  for (int64_t context : contexts) {
    std::vector<double> tps;
    runner.draws = runner.logit_draws = 0;
    for (int r = 0; r <= runs; ++r) {  // r = 0 warms up
      std::vector<int32_t> seqs, firsts;
      for (int s = 0; s < batch; ++s) {
        auto seq = runner.prefill(context);
        if (!seq.is_ok()) {
          std::fprintf(stderr, "%s\n", seq.error_message().c_str());
          return 1;
        }
        seqs.push_back(seq.value());
        firsts.push_back(runner.next);
      }
#if HELIUM_HAVE_CUDA
      // HELIUM_CUDA_ATTN_TRACE=1: the stamps of earlier runs and of the prefill go (the last run's stay, below).
      if (auto* cb = dynamic_cast<CudaBackend*>(backend.get()); cb != nullptr) (void)cb->take_attention_trace();
#endif
      double t0 = now_seconds();
      Status st = batch == 1 ? runner.decode(seqs[0], tokens) : runner.decode_batch(seqs, firsts, tokens);
      double t1 = now_seconds();
      for (int32_t seq : seqs) kv.value()->free_sequence(seq);
      if (!st.is_ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      if (r > 0) tps.push_back(static_cast<double>(batch) * tokens / (t1 - t0));
    }
    const double mean_context = context + tokens / 2.0;
    const double ceiling = batch * bandwidth / (weight_bytes + batch * kv_bytes_per_position * mean_context);
    const double d = median(tps);
    std::fflush(stdout);
    std::printf("decode    context %6lld: %8.2f tok/s   ceiling %8.2f tok/s   ratio %.3f   (%lld tokens%s, median of %d)\n",
                static_cast<long long>(context), d, ceiling, d / ceiling, static_cast<long long>(tokens),
                batch > 1 ? (" x " + std::to_string(batch) + " rows").c_str() : "", runs);
    j["decode"].push_back({{"context", context}, {"tokens", tokens}, {"tok_s", d}, {"runs_tok_s", tps},
                           {"ceiling_tok_s", ceiling}, {"ratio", d / ceiling}});
#if HELIUM_HAVE_CUDA
    // HELIUM_CUDA_ATTN_TRACE=1 (diagnostic): the last step's last layer of decode attention, block by block
    // (CudaBackend::take_attention_trace), as medians of each event's time since its block started.
    if (auto* cb = dynamic_cast<CudaBackend*>(backend.get()); cb != nullptr) {
      const std::vector<uint64_t> t = cb->take_attention_trace();
      constexpr int kEvents = CudaBackend::kAttentionTraceEvents;
      std::vector<std::vector<double>> since_start(kEvents);
      uint64_t first = UINT64_MAX, last = 0;
      std::vector<double> after_wait;  // each block's wait to its partials: the slowest is the merge's wait
      for (size_t b = 0; b + kEvents <= t.size(); b += kEvents) {
        if (t[b] == 0 || t[b + kEvents - 1] == 0) continue;  // not run, or past its row's keys
        first = std::min(first, t[b]);
        last = std::max(last, t[b + kEvents - 1]);
        after_wait.push_back((static_cast<double>(t[b + kEvents - 1]) - t[b + 2]) / 1e3);
        for (int e = 1; e < kEvents; ++e) since_start[e].push_back((static_cast<double>(t[b + e]) - t[b]) / 1e3);
      }
      if (!since_start[1].empty()) {
        static const char* kNames[kEvents] = {"start", "slots", "wait", "first_chunk", "k_done", "softmax_done",
                                              "v_done", "partials"};
        const double slowest = *std::max_element(after_wait.begin(), after_wait.end());
        const double typical = median(after_wait);
        nlohmann::json trace = {{"blocks", since_start[1].size()},
                                {"first_start_to_last_partials_us", (last - first) / 1e3},
                                {"wait_to_partials_median_us", typical},
                                {"wait_to_partials_max_us", slowest}};
        std::printf("          attention trace (last layer, %zu blocks), us from a block's start (median):",
                    since_start[1].size());
        for (int e = 1; e < kEvents; ++e) {
          const double at = median(since_start[e]);
          trace[kNames[e]] = at;
          std::printf(" %s %.2f", kNames[e], at);
        }
        std::printf("; first start to last partials %.2f; wait to partials %.2f, slowest block %.2f\n",
                    (last - first) / 1e3, typical, slowest);
        j["decode"].back()["attention_trace"] = trace;
      }
    }
#endif
    if (sampling && sampling->device_candidates(Backend::kMaxSelectTopK)) {
      const int64_t draws = runner.draws;  // the warm-up's and the prefills' last tokens included
      std::printf("          draws from the candidates: %lld of %lld (the rest copied the logits)\n",
                  static_cast<long long>(draws - runner.logit_draws), static_cast<long long>(draws));
      j["decode"].back()["draws"] = draws;
      j["decode"].back()["draws_from_logits"] = runner.logit_draws;
    }
    if (!json_path.empty()) std::ofstream(json_path) << j.dump(1) << "\n";  // partial results survive a timeout
  }
  std::vector<double> prefill_tps;
  for (int r = 0; r <= runs; ++r) {
    double t0 = now_seconds();
    auto seq = runner.prefill(prefill_tokens);
    double t1 = now_seconds();
    if (!seq.is_ok()) {
      std::fprintf(stderr, "%s\n", seq.error_message().c_str());
      return 1;
    }
    kv.value()->free_sequence(seq.value());
    if (r > 0) prefill_tps.push_back(prefill_tokens / (t1 - t0));
  }
  const double p = median(prefill_tps);
  // Prefill is compute-bound: its ceiling is the matrix throughput, 2 FLOP per weight per token (attention
  // FLOPs excluded), reported as the FLOP rate achieved.
  const double flops = 2.0 * static_cast<double>(info.parameters) * p;
  std::printf("prefill   %lld tokens: %.1f tok/s (%.1f TFLOP/s in weight matmuls; median of %d)\n",
              static_cast<long long>(prefill_tokens), p, flops / 1e12, runs);
  j["prefill"] = {{"tokens", prefill_tokens}, {"tok_s", p}, {"runs_tok_s", prefill_tps}, {"weight_tflops", flops / 1e12}};
  if (!json_path.empty()) std::ofstream(json_path) << j.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace helium

int main(int argc, char** argv) { return helium::run(argc, argv); }
