// bench/cpu/bench_cpu_ops.cpp — times the CPU backend's matmul on decode (1 row) and prefill (64 rows)
// shapes of Qwen3-0.6B with BF16 weights, and prints the weight traffic in GB/s beside the machine's
// measured read bandwidth (a multi-threaded read over 1 GiB), the ceiling a decode matmul can reach.
// Also times attention for one decode row at 1K/4K/16K keys (KV bytes read per second, same ceiling), and
// the host sampler's draw (sample_token, T 0.7 / top_p 0.95) over a 151,936-logit row, flat and peaked,
// beside the time one thread takes to read the row once.
// Prefill rows reuse each weight tile from cache, so their GB/s is far below the ceiling by design; their
// figure of merit is GFLOP/s.
// Each call reads a different copy of the weights (together far larger than any last-level cache), as
// a model's layers do, so decode figures are memory figures, not cache figures.
//
//   helium_bench_cpu_ops [--threads N] [--isa scalar|avx2|avx512] [--json PATH] [--quick]
// --quick takes fewer samples (same sizes).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "sample/sampler.h"

namespace helium {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of `call` (already warmed up): the median of 3 (quick) or 7 samples of about 50 ms of
// calls each, at least one call a sample.
template <class F>
double seconds_per_call(F&& call, bool quick) {
  auto t0 = Clock::now();
  call();
  const int calls = std::max(1, static_cast<int>(0.05 / std::max(seconds_since(t0), 1e-7)));
  std::vector<double> per_call;
  for (int sample = 0; sample < (quick ? 3 : 7); ++sample) {
    t0 = Clock::now();
    for (int i = 0; i < calls; ++i) call();
    per_call.push_back(seconds_since(t0) / calls);
  }
  return median(per_call);
}

struct Options {
  int threads = 0;
  std::optional<CpuIsa> isa;
  std::string json_path;
  bool quick = false;
};

// Aligned, touched (so page faults are not timed) host memory.
struct HostArray {
  explicit HostArray(size_t bytes_) : bytes(bytes_) {
    data = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    if (data == nullptr) {
      std::fprintf(stderr, "out of memory for %zu bytes\n", bytes);
      std::exit(1);
    }
    std::memset(data, 1, bytes);
  }
  ~HostArray() { std::free(data); }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  uint8_t* data;
  size_t bytes;
};

struct Bandwidth {
  double read_gbps;       // the ceiling: the best of the read patterns below
  double read_one_stream_gbps, read_eight_streams_gbps;
  double copy_gbps;
};

// Sums every 64-bit word of [begin, end) lines of `p`, walking `streams` equal parts of the range side
// by side (one line of each per step): several streams per thread keep more misses in flight and more
// prefetchers busy, as a matmul's rows of w do, and on some machines read faster than one stream.
uint64_t read_lines(const uint64_t* p, int64_t begin, int64_t end, int streams) {
  const int64_t per_stream = (end - begin) / streams;
  uint64_t s[8] = {};
  for (int64_t line = 0; line < per_stream; ++line)
    for (int st = 0; st < streams; ++st) {
      const uint64_t* q = p + (begin + st * per_stream + line) * 8;
      for (int j = 0; j < 8; ++j) s[j] += q[j];
    }
  uint64_t total = 0;
  for (uint64_t v : s) total += v;
  return total;
}

// The ceiling a decode matmul is compared with: every thread reads its contiguous share of a 1 GiB
// buffer, as one stream or as eight; the faster pattern's median over 5 passes (after one warm-up pass)
// is the read ceiling. memcpy of 512 MiB is reported beside it, counted as bytes read plus written.
Bandwidth measure_bandwidth(ThreadPool& pool, int passes) {
  const size_t bytes = size_t{1} << 30;
  HostArray buffer(bytes);
  const int64_t lines = static_cast<int64_t>(bytes / 64);
  const auto* words = reinterpret_cast<const uint64_t*>(buffer.data);
  std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
  auto read_gbps = [&](int streams) {
    std::vector<double> seconds;
    for (int pass = 0; pass <= passes; ++pass) {
      auto t0 = Clock::now();
      pool.parallel_for(lines, 4096, [&](int64_t begin, int64_t end) {
        sink[static_cast<size_t>(begin * pool.size() / lines)] += read_lines(words, begin, end, streams);
      });
      if (pass > 0) seconds.push_back(seconds_since(t0));
    }
    return bytes / median(seconds) / 1e9;
  };
  Bandwidth bw{};
  bw.read_one_stream_gbps = read_gbps(1);
  bw.read_eight_streams_gbps = read_gbps(8);
  bw.read_gbps = std::max(bw.read_one_stream_gbps, bw.read_eight_streams_gbps);
  const size_t half = bytes / 2;
  std::vector<double> copy_s;
  for (int pass = 0; pass <= passes; ++pass) {
    auto t0 = Clock::now();
    pool.parallel_for(static_cast<int64_t>(half / 4096), 1, [&](int64_t begin, int64_t end) {
      std::memcpy(buffer.data + half + begin * 4096, buffer.data + begin * 4096, static_cast<size_t>(end - begin) * 4096);
    });
    if (pass > 0) copy_s.push_back(seconds_since(t0));
  }
  if (sink[0] == 42) std::printf(" ");  // keeps the sums alive
  bw.copy_gbps = 2.0 * half / median(copy_s) / 1e9;
  return bw;
}

struct MatmulShape {
  const char* name;
  int64_t k, n;
};

struct MatmulResult {
  std::string name;
  int64_t rows, k, n;
  double ms, weight_gbps, gflops;
};

MatmulResult time_matmul(CpuBackend& cpu, const MatmulShape& shape, int64_t rows, bool quick) {
  const size_t w_bytes = static_cast<size_t>(shape.n * shape.k) * 2;
  // Enough distinct copies (1 GiB) that one round through them exceeds any last-level cache several times
  // (a server's L3 can exceed 100 MiB).
  const size_t copies = std::max<size_t>(4, (size_t{1} << 30) / w_bytes);
  HostArray weights(copies * w_bytes);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto* w16 = reinterpret_cast<uint16_t*>(weights.data);
  for (size_t i = 0; i < w_bytes / 2; ++i) w16[i] = f32_to_bf16(dist(rng) * 0.05f);
  for (size_t c = 1; c < copies; ++c) std::memcpy(weights.data + c * w_bytes, weights.data, w_bytes);
  std::vector<float> x(static_cast<size_t>(rows * shape.k)), y(static_cast<size_t>(rows * shape.n));
  for (float& v : x) v = dist(rng);

  const Tensor xt(x.data(), DType::F32, {rows, shape.k});
  const Tensor yt(y.data(), DType::F32, {rows, shape.n});
  size_t next = 0;
  auto call = [&] {
    const Tensor wt(weights.data + next * w_bytes, DType::BF16, {shape.n, shape.k});
    next = (next + 1) % copies;
    cpu.matmul(xt, wt, Tensor(), yt);
  };
  for (size_t i = 0; i < copies; ++i) call();  // warm-up: one round over all copies
  const double s = seconds_per_call(call, quick);
  return {shape.name, rows, shape.k, shape.n, s * 1e3, w_bytes / s / 1e9, 2.0 * rows * shape.n * shape.k / s / 1e9};
}

struct AttentionResult {
  int64_t context;
  double ms, kv_gbps;
};

// One decode row of Qwen3-0.6B attention (16 query heads, 8 kv heads of 128, BF16 cache) over `context`
// keys. Each call reads a different region of a 1 GiB cache, as successive layers do.
AttentionResult time_attention_decode(CpuBackend& cpu, int64_t context, bool quick) {
  const int n_heads = 16, n_kv_heads = 8, head_dim = 128;
  const int64_t kv_dim = int64_t{n_kv_heads} * head_dim, q_dim = int64_t{n_heads} * head_dim;
  const int64_t slot_bytes = kv_dim * 2;
  const int64_t copies = std::max<int64_t>(2, (int64_t{1} << 29) / (context * slot_bytes));  // 2 × 512 MiB
  const int64_t cache_slots = copies * context;
  HostArray k_cache(static_cast<size_t>(cache_slots * slot_bytes)), v_cache(static_cast<size_t>(cache_slots * slot_bytes));
  auto* k16 = reinterpret_cast<uint16_t*>(k_cache.data);
  auto* v16 = reinterpret_cast<uint16_t*>(v_cache.data);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Realistic values everywhere: HostArray's byte fill would make BF16 values near FLT_MIN, whose
  // products are subnormal and cost microcode assists on Intel CPUs (10x slower, a benchmark artefact).
  for (int64_t i = 0; i < context * kv_dim; ++i) {
    k16[i] = f32_to_bf16(dist(rng));
    v16[i] = f32_to_bf16(dist(rng));
  }
  for (int64_t c = 1; c < copies; ++c) {
    std::memcpy(k16 + c * context * kv_dim, k16, static_cast<size_t>(context * slot_bytes));
    std::memcpy(v16 + c * context * kv_dim, v16, static_cast<size_t>(context * slot_bytes));
  }
  std::vector<float> q(static_cast<size_t>(q_dim)), out(static_cast<size_t>(q_dim));
  for (float& f : q) f = dist(rng);
  std::vector<int32_t> slots(static_cast<size_t>(cache_slots));
  for (int64_t i = 0; i < cache_slots; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::vector<int32_t> offsets(2);
  const AttentionShape shape{n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  int64_t next = 0;
  auto call = [&] {
    offsets = {0, static_cast<int32_t>(context)};
    const AttentionLayout layout{Tensor(offsets.data(), DType::I32, {2}),
                                 Tensor(slots.data() + next * context, DType::I32, {context})};
    next = (next + 1) % copies;
    cpu.attention(Tensor(q.data(), DType::F32, {1, q_dim}), Tensor(k_cache.data, DType::BF16, {cache_slots, kv_dim}),
                  Tensor(v_cache.data, DType::BF16, {cache_slots, kv_dim}), shape, layout,
                  Tensor(out.data(), DType::F32, {1, q_dim}));
  };
  for (int64_t i = 0; i < copies; ++i) call();
  const double sec = seconds_per_call(call, quick);
  return {context, sec * 1e3, 2.0 * context * slot_bytes / sec / 1e9};
}

struct SampleResult {
  std::string row;
  double ms, floor_ms;
};

// One host draw (sample_token) over a Qwen-sized row of logits at a coding agent's settings (T 0.7, top_p
// 0.95), u varied per draw. "flat": logits N(0, 0.02), as the dummy weights give (top_p reaches past the
// best 1,024 candidates, so the whole row is ranked); "peaked": N(0, 3), as a trained model's rows are.
SampleResult time_sample(const char* kind, float spread, double read_gbps, bool quick) {
  const int64_t vocab = 151936;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = dist(rng);
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.95f;
  SamplerScratch scratch;
  int64_t sink = 0;
  int draw = 0;
  auto call = [&] { sink += sample_token(row, p, {}, 0, (draw++ % 97 + 0.5) / 97.0, scratch); };
  call();
  const double sec = seconds_per_call(call, quick);
  if (sink < 0) std::printf("%lld\n", static_cast<long long>(sink));  // keeps the draws
  return {kind, sec * 1e3, vocab * 4.0 / (read_gbps * 1e9) * 1e3};
}

int run(const Options& opt) {
  Result<std::unique_ptr<CpuBackend>> cpu = CpuBackend::create(opt.threads, opt.isa);
  if (!cpu) {
    std::fprintf(stderr, "helium_bench_cpu_ops: %s\n", cpu.error_message().c_str());
    return 1;
  }
  const int threads = (*cpu)->threads();
  std::printf("helium_bench_cpu_ops: %s, hardware threads %u\n", (*cpu)->name().c_str(),
              std::thread::hardware_concurrency());

  ThreadPool pool(threads);
  const Bandwidth bw = measure_bandwidth(pool, opt.quick ? 2 : 5);
  std::printf("memory ceiling (%d threads): read %.1f GB/s (one stream per thread %.1f, eight %.1f), memcpy %.1f "
              "GB/s (read + write)\n\n",
              threads, bw.read_gbps, bw.read_one_stream_gbps, bw.read_eight_streams_gbps, bw.copy_gbps);

  // Qwen3-0.6B: hidden 1024, 16 query heads and 8 kv heads of 128, intermediate 3072.
  const std::vector<MatmulShape> shapes = {
      {"gate/up_proj", 1024, 3072}, {"k/v_proj", 1024, 1024}, {"q_proj", 1024, 2048}, {"down_proj", 3072, 1024}};
  std::vector<MatmulResult> results;
  std::printf("%-14s %5s %6s %6s %10s %12s %10s %9s\n", "matmul bf16", "rows", "k", "n", "ms/call", "weight GB/s",
              "% ceiling", "GFLOP/s");
  for (int64_t rows : {1, 64}) {
    for (const MatmulShape& shape : shapes) {
      MatmulResult r = time_matmul(**cpu, shape, rows, opt.quick);
      std::printf("%-14s %5lld %6lld %6lld %10.4f %12.1f %9.0f%% %9.1f\n", r.name.c_str(),
                  static_cast<long long>(r.rows), static_cast<long long>(r.k), static_cast<long long>(r.n), r.ms,
                  r.weight_gbps, 100.0 * r.weight_gbps / bw.read_gbps, r.gflops);
      results.push_back(r);
    }
  }

  std::printf("\n%-28s %8s %10s %12s %10s\n", "attention decode bf16 cache", "context", "ms/call", "KV GB/s",
              "% ceiling");
  std::vector<AttentionResult> attention;
  for (int64_t context : {1024, 4096, 16384}) {
    AttentionResult r = time_attention_decode(**cpu, context, opt.quick);
    std::printf("%-28s %8lld %10.4f %12.1f %9.0f%%\n", "16 q / 8 kv heads x 128", static_cast<long long>(context),
                r.ms, r.kv_gbps, 100.0 * r.kv_gbps / bw.read_gbps);
    attention.push_back(r);
  }

  std::printf("\n%-40s %10s %22s\n", "host draw, 151,936 logits, T 0.7 top_p 0.95", "ms/draw", "row read once (1 thread)");
  std::vector<SampleResult> sampling;
  for (const auto& [kind, spread] : {std::pair<const char*, float>{"flat", 0.02f}, {"peaked", 3.0f}}) {
    SampleResult r = time_sample(kind, spread, bw.read_one_stream_gbps, opt.quick);
    std::printf("%-40s %10.3f %19.3f ms\n", r.row.c_str(), r.ms, r.floor_ms);
    sampling.push_back(r);
  }

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["backend"] = (*cpu)->name();
    j["isa"] = std::string(cpu_isa_name((*cpu)->isa()));
    j["threads"] = threads;
    j["ceiling"] = {{"read_gbps", bw.read_gbps},
                    {"read_one_stream_per_thread_gbps", bw.read_one_stream_gbps},
                    {"read_eight_streams_per_thread_gbps", bw.read_eight_streams_gbps},
                    {"memcpy_gbps", bw.copy_gbps}};
    for (const MatmulResult& r : results)
      j["matmul"].push_back({{"name", r.name},
                             {"dtype", "BF16"},
                             {"rows", r.rows},
                             {"k", r.k},
                             {"n", r.n},
                             {"ms_per_call", r.ms},
                             {"weight_gbps", r.weight_gbps},
                             {"fraction_of_read_ceiling", r.weight_gbps / bw.read_gbps},
                             {"gflops", r.gflops}});
    for (const AttentionResult& r : attention)
      j["attention_decode"].push_back({{"n_heads", 16},
                                       {"n_kv_heads", 8},
                                       {"head_dim", 128},
                                       {"cache_dtype", "BF16"},
                                       {"context", r.context},
                                       {"ms_per_call", r.ms},
                                       {"kv_gbps", r.kv_gbps},
                                       {"fraction_of_read_ceiling", r.kv_gbps / bw.read_gbps}});
    for (const SampleResult& r : sampling)
      j["sample_draw"].push_back({{"row", r.row},
                                  {"vocab", 151936},
                                  {"temperature", 0.7},
                                  {"top_p", 0.95},
                                  {"ms_per_draw", r.ms},
                                  {"row_read_once_ms", r.floor_ms},
                                  {"fraction_of_read_ceiling", r.floor_ms / r.ms}});
    std::ofstream out(opt.json_path);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "helium_bench_cpu_ops: cannot write %s\n", opt.json_path.c_str());
      return 1;
    }
    std::printf("\nwrote %s\n", opt.json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace helium

int main(int argc, char** argv) {
  helium::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--threads" && has_value) {
      opt.threads = std::atoi(argv[++i]);
    } else if (arg == "--isa" && has_value) {
      helium::Result<helium::CpuIsa> isa = helium::parse_cpu_isa(argv[++i]);
      if (!isa) {
        std::fprintf(stderr, "helium_bench_cpu_ops: %s\n", isa.error_message().c_str());
        return 2;
      }
      opt.isa = *isa;
    } else if (arg == "--json" && has_value) {
      opt.json_path = argv[++i];
    } else if (arg == "--quick") {
      opt.quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--isa scalar|avx2|avx512] [--json PATH] [--quick]\n", argv[0]);
      return 2;
    }
  }
  return helium::run(opt);
}
