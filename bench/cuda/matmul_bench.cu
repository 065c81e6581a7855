// bench/cuda/matmul_bench.cu — times the CUDA matmul on Qwen3-8B's shapes with BF16 weights:
// - the decode kernel (rows 1..64) with its default configuration, as achieved GB/s of weight traffic
//   beside the device-to-device copy bandwidth measured here (cudaMemcpyAsync of 1 GiB, counting bytes
//   read plus bytes written, the figure DESIGN.md's decode ceiling uses);
// - every candidate configuration of each shape at 1 and 8 rows, and the winner at 1 row (what the
//   autotuner does at first start);
// - the prefill path (cuBLASLt, rows > 64) in TFLOP/s, including the rounding of x to BF16.
// Each decode call reads a different copy of the weights (together more than 4× the L2), as a model's
// layers do, so the figures are HBM figures. Times are per call: a CUDA graph of many calls (launch gaps
// as small as the engine's graphs get), replayed after a warm-up; the median over replays.
//
// - the layer chain: a layer's four decode matmuls with their fusions (RMSNorm + q/k/v, o_proj + residual,
//   RMSNorm + gate/up, SwiGLU + down + residual) launched as the decode step launches them (programmatic
//   dependent launch, the matmul's early trigger; gate/up storing the SwiGLU activation, as
//   CudaBackend::swiglu_mlp_add runs them), each configuration chosen by timing the candidates
//   in such a chain, over 36 layers of distinct weights: what the matmuls cost inside a step, without
//   the attention between them. Then the timeline of one layer (trace_layer): per-block %globaltimer
//   stamps of its matmuls, which show where the weight stream stops between kernels.
//
//   helium_bench_cuda_matmul [--json PATH] [--quick] [--chain]
// --quick: fewer replays, no candidate sweep. --chain: the layer chain only.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/switches.h"
#include "bench_cuda.h"

namespace helium {
namespace {

struct Options {
  std::string json_path;
  bool quick = false;
  bool chain_only = false;
};

struct Shape {
  const char* name;
  int64_t n, k;
};

// Qwen3-8B: hidden 4096, 32 query heads and 8 KV heads of 128, intermediate 12288, vocabulary 151936.
const Shape kShapes[] = {
    {"q_proj/o_proj", 4096, 4096}, {"k_proj/v_proj", 1024, 4096}, {"gate/up_proj", 12288, 4096},
    {"down_proj", 4096, 12288},    {"lm_head", 151936, 4096},
    {"qkv_proj (stacked)", 6144, 4096}, {"gate_up_proj (stacked)", 24576, 4096},
};
const int kDecodeRows[] = {1, 2, 4, 8, 16, 32, 64};

__device__ uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ float uniform_pm1(uint64_t seed, uint64_t i) {
  return static_cast<float>(splitmix64(seed * 0x100000001b3ull + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
__global__ void fill_bf16(__nv_bfloat16* p, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = __float2bfloat16(scale * uniform_pm1(seed, static_cast<uint64_t>(i)));
}
__global__ void fill_f32(float* p, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = scale * uniform_pm1(seed, static_cast<uint64_t>(i));
}

class DeviceArray {
 public:
  explicit DeviceArray(size_t bytes) : bytes_(bytes) { BENCH_CUDA(cudaMalloc(&data_, std::max<size_t>(bytes, 256))); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* get() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds of `work` (enqueued on `stream`), median over `samples` timed runs after 2 warm-ups.
template <class F>
double time_ms(cudaStream_t stream, int samples, F&& work) {
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int i = 0; i < samples + 2; ++i) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    work();
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float t = 0.0f;
    BENCH_CUDA(cudaEventElapsedTime(&t, start, stop));
    if (i >= 2) ms.push_back(t);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return median(ms);
}

// Milliseconds per call of `calls` enqueued calls (call(i) for i < calls), captured in one graph.
template <class F>
double time_per_call_ms(cudaStream_t stream, int calls, int samples, F&& call) {
  for (int i = 0; i < calls; ++i) call(i);  // outside the capture: one-time attribute setting, lazy loading
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) call(i);
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = time_ms(stream, samples, [&] { BENCH_CUDA(cudaGraphLaunch(exec, stream)); });
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  return ms / calls;
}

std::string config_string(const cuda::MatmulDecodeConfig& c) {
  char buf[96];
  if (c.mma_stages > 0) {
    std::snprintf(buf, sizeof buf, "tensor cores, %d stages", c.mma_stages);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "lane %d x %d rounds, warps %d x %d k", c.features_per_lane, c.rounds_in_flight,
                c.feature_warps, c.k_warps);
  return buf;
}

struct JsonWriter {
  std::string out;
  void raw(const std::string& s) { out += s; }
  void kv(const char* key, double v, bool comma = true) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"%s\": %.6g%s", key, v, comma ? ", " : "");
    out += buf;
  }
  void kv(const char* key, const std::string& v, bool comma = true) {
    out.append("\"").append(key).append("\": \"").append(v).append(comma ? "\", " : "\"");
  }
};

int write_json(const std::string& path, const std::string& text) {
  if (path.empty()) return 0;
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return 1;
  }
  std::fprintf(f, "%s\n", text.c_str());
  std::fclose(f);
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

// Where a layer's time goes between and inside its kernels: the layer chain runs once more with the given
// configurations, and the five matmuls from the previous layer's down to this layer's down write per-block
// %globaltimer stamps (Context::matmul_trace). Printed per kernel, in microseconds from the first block
// start of the first traced kernel: block starts (first / median / last), the wait released, x staged,
// the first item stored, the block ends; and the gap from one kernel's last block end to the next kernel's
// median x staged (no weight bytes are consumed on that SM meanwhile). Returns the JSON array.
template <class Call>
std::string trace_layer(cuda::Context& ctx, cuda::MatmulDecodeTable& table,
                        const std::vector<cuda::MatmulDecodeShapeConfig>& configs, const Call& call, int layers) {
  // The decode matmul's grid is persistent: at most the blocks resident at once (32 a multiprocessor at most).
  const int max_blocks = 32 * ctx.sm_count;
  constexpr int kE = cuda::kMatmulTraceEvents;
  const int layer = layers / 2;
  struct Traced {
    int op, layer;
  };
  const Traced traced[] = {{3, layer - 1}, {0, layer}, {1, layer}, {2, layer}, {3, layer}};
  const char* names[] = {"down (prev layer)", "qkv", "o_proj", "gate_up", "down"};
  constexpr int kTraced = 5;
  DeviceArray buffer(sizeof(unsigned long long) * max_blocks * kE * kTraced);
  auto* stamps = static_cast<unsigned long long*>(buffer.get());
  table.entries = configs;
  // Captured as the timed chains are (a graph, replayed once to warm up, then once traced).
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  for (int l = 0; l < layers; ++l)
    for (int op = 0; op < 4; ++op) {
      int t = -1;
      for (int i = 0; i < kTraced; ++i)
        if (traced[i].op == op && traced[i].layer == l) t = i;
      ctx.matmul_trace = t >= 0 ? stamps + static_cast<size_t>(t) * max_blocks * kE : nullptr;
      call(op, l);
    }
  ctx.matmul_trace = nullptr;
  BENCH_CUDA(cudaStreamEndCapture(ctx.stream, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphLaunch(exec, ctx.stream));
  BENCH_CUDA(cudaMemsetAsync(stamps, 0, buffer.bytes(), ctx.stream));
  BENCH_CUDA(cudaGraphLaunch(exec, ctx.stream));
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  std::vector<unsigned long long> host(static_cast<size_t>(max_blocks) * kE * kTraced);
  BENCH_CUDA(cudaMemcpyAsync(host.data(), stamps, host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost, ctx.stream));
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  // Blocks that ran have a nonzero start. t0: the first traced kernel's first start.
  auto stamps_of = [&](int t, int b) { return &host[(static_cast<size_t>(t) * max_blocks + b) * kE]; };
  unsigned long long t0 = ~0ull, step = ~0ull;
  for (int b = 0; b < max_blocks; ++b)
    if (stamps_of(0, b)[0] != 0) t0 = std::min(t0, stamps_of(0, b)[0]);
  // ev[kernel][event]: µs from t0 (the difference taken in integers: the stamps exceed a double's exact range).
  std::vector<std::vector<std::vector<double>>> ev(kTraced, std::vector<std::vector<double>>(kE));
  for (int t = 0; t < kTraced; ++t)
    for (int b = 0; b < max_blocks; ++b) {
      const unsigned long long* r = stamps_of(t, b);
      if (r[0] == 0) continue;
      for (int e = 0; e < kE; ++e) {
        ev[t][e].push_back(static_cast<double>(static_cast<long long>(r[e] - t0)) * 1e-3);
        if (e > 0 && r[e] > r[e - 1]) step = std::min(step, r[e] - r[e - 1]);
      }
    }
  auto pick = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
  };
  std::printf("  timeline of layer %d (us from the first block start; smallest stamp step %.3f us; ends of the\n"
              "  previous kernel -> x staged here = the gap in which no weight is consumed):\n",
              layer, step == ~0ull ? 0.0 : step * 1e-3);
  std::printf("    %-18s %6s  %-23s %-16s %-16s %8s  %-16s %7s\n", "kernel", "blocks", "start min/med/max",
              "released med/max", "staged med/max", "item1 med", "end med/max", "gap");
  std::string json = "[";
  for (int t = 0; t < kTraced; ++t) {
    const auto& e = ev[t];
    const double gap = t > 0 ? pick(e[3], 0.5) - pick(ev[t - 1][5], 1.0) : 0.0;
    std::printf("    %-18s %6zu  %6.2f %6.2f %7.2f  %7.2f %7.2f  %7.2f %7.2f  %8.2f  %7.2f %7.2f  %7.2f\n", names[t],
                e[0].size(), pick(e[0], 0), pick(e[0], 0.5), pick(e[0], 1), pick(e[2], 0.5), pick(e[2], 1),
                pick(e[3], 0.5), pick(e[3], 1), pick(e[4], 0.5), pick(e[5], 0.5), pick(e[5], 1), gap);
    JsonWriter w;
    w.raw(t == 0 ? "{" : ", {");
    w.kv("kernel", std::string(names[t]));
    w.kv("blocks", static_cast<double>(e[0].size()));
    w.kv("start_min_us", pick(e[0], 0));
    w.kv("start_max_us", pick(e[0], 1));
    w.kv("released_median_us", pick(e[2], 0.5));
    w.kv("staged_median_us", pick(e[3], 0.5));
    w.kv("first_item_median_us", pick(e[4], 0.5));
    w.kv("end_median_us", pick(e[5], 0.5));
    w.kv("end_max_us", pick(e[5], 1), false);
    w.raw("}");
    json += w.out;
  }
  return json + "]";
}

// The layer chain (see the header): returns its JSON object. ctx is switched to the decode step's launch
// mode (programmatic dependent launch, early trigger) for the duration.
std::string layer_chain(cuda::Context& ctx, double copy_gbps, int samples) {
  constexpr int kLayers = 36;
  const int64_t hidden = 4096, inter = 12288, q_dim = 4096, kv_dim = 1024;
  struct ChainOp {
    const char* name;
    int64_t n, k;
  };
  // The four of a layer with their fusions; the MLP as two fused ops (SwiGLU applied by the down matmul as
  // it stages x); then the same matmuls without any fusion (what the fusions cost).
  const ChainOp ops[] = {{"qkv (RMSNorm fused)", q_dim + 2 * kv_dim, hidden},
                         {"o_proj (+ residual)", hidden, q_dim},
                         {"gate_up (RMSNorm, SwiGLU stored)", 2 * inter, hidden},
                         {"down (+ residual)", hidden, inter},
                         {"gate_up (RMSNorm fused, split)", 2 * inter, hidden},
                         {"down (SwiGLU fused, + residual)", hidden, inter},
                         {"qkv, plain", q_dim + 2 * kv_dim, hidden},
                         {"o_proj, plain", hidden, q_dim},
                         {"gate_up, plain", 2 * inter, hidden},
                         {"down, plain", hidden, inter}};
  std::vector<std::unique_ptr<DeviceArray>> weights;
  for (int i = 0; i < 4; ++i) {
    const ChainOp& op = ops[i];
    weights.push_back(std::make_unique<DeviceArray>(static_cast<size_t>(op.n * op.k) * 2 * kLayers));
    fill_bf16<<<4096, 256, 0, ctx.stream>>>(static_cast<__nv_bfloat16*>(weights.back()->get()), op.n * op.k * kLayers,
                                            11, 0.05f);
    BENCH_CUDA(cudaGetLastError());
  }
  DeviceArray norm_w(hidden * 2), acts(size_t{8} * inter * 4), scratch(inter * 4);
  fill_bf16<<<16, 256, 0, ctx.stream>>>(static_cast<__nv_bfloat16*>(norm_w.get()), hidden, 12, 1.0f);
  fill_f32<<<64, 256, 0, ctx.stream>>>(static_cast<float*>(acts.get()), 8 * inter, 13, 1.0f);
  BENCH_CUDA(cudaGetLastError());
  float* a = static_cast<float*>(acts.get());
  const Tensor residual(a, DType::F32, {1, hidden}), attn(a + inter, DType::F32, {1, q_dim});
  const Tensor q(a + 2 * inter, DType::F32, {1, q_dim}), k(a + 2 * inter + q_dim, DType::F32, {1, kv_dim}),
      v(a + 2 * inter + q_dim + kv_dim, DType::F32, {1, kv_dim});
  const Tensor gate(a + 3 * inter, DType::F32, {1, inter}), up(a + 4 * inter, DType::F32, {1, inter});
  const Tensor nw(norm_w.get(), DType::BF16, {hidden}), scr(scratch.get(), DType::F32, {1, inter});
  auto weight = [&](int op, int layer) {
    const int base = op < 4 ? op : op < 6 ? op - 2 : op - 6;  // the weights of ops 0-3
    const ChainOp& o = ops[base];
    return Tensor(static_cast<char*>(weights[base]->get()) + static_cast<size_t>(layer) * o.n * o.k * 2,
                  DType::BF16, {o.n, o.k});
  };
  auto call = [&](int op, int layer) {
    const Tensor w = weight(op, layer);
    switch (op) {
      case 0: {
        const Tensor ys[] = {q, k, v};
        cuda::rms_norm_matmul_split(ctx, residual, nw, 1e-6f, false, scr, w, Tensor(), ys);
        break;
      }
      case 1: cuda::matmul_add(ctx, attn, w, Tensor(), scr, residual); break;
      case 2: cuda::rms_norm_matmul_swiglu(ctx, residual, nw, 1e-6f, false, w, Tensor(), gate); break;
      case 3: cuda::matmul_add(ctx, gate, w, Tensor(), scr, residual); break;
      case 4: {
        const Tensor ys[] = {gate, up};
        cuda::rms_norm_matmul_split(ctx, residual, nw, 1e-6f, false, scr, w, Tensor(), ys);
        break;
      }
      case 5: cuda::swiglu_matmul_add(ctx, gate, up, w, Tensor(), scr, residual); break;
      case 6: {
        const Tensor ys[] = {q, k, v};
        cuda::matmul_split(ctx, residual, w, Tensor(), ys);
        break;
      }
      case 7: cuda::matmul(ctx, attn, w, Tensor(), residual); break;
      case 8: {
        const Tensor ys[] = {gate, up};
        cuda::matmul_split(ctx, residual, w, Tensor(), ys);
        break;
      }
      default: cuda::matmul(ctx, gate, w, Tensor(), residual); break;
    }
  };
  // A layer's matmuls as the decode step runs them (CudaBackend with its norm handoffs): q/k/v reading the
  // handoff the previous layer's down wrote, o_proj (+ residual, its x split by a split kernel) writing the
  // MLP's, and the MLP as one fused op — gate/up reading that handoff and storing the activation and its
  // split, down reading the split and writing the next layer's handoff.
  cuda::NormHandoff handoff = cuda::norm_handoff_slot(ctx, 1, hidden);
  if (handoff.split == nullptr) {
    std::fprintf(stderr, "layer chain: no norm handoff slot in the matmul scratch\n");
    std::abort();
  }
  handoff.norm_w = nw;
  auto step_layer = [&](int layer) {
    const Tensor ys[] = {q, k, v};
    cuda::rms_norm_matmul_split(ctx, residual, nw, 1e-6f, false, scr, weight(0, layer), Tensor(), ys, &handoff);
    cuda::matmul_add(ctx, attn, weight(1, layer), Tensor(), scr, residual, &handoff);
    if (!cuda::rms_norm_swiglu_mlp_add(ctx, residual, nw, 1e-6f, false, weight(2, layer), Tensor(), gate,
                                       weight(3, layer), Tensor(), &handoff, &handoff)) {
      std::fprintf(stderr, "layer chain: the fused MLP did not take Qwen3-8B's shapes\n");
      std::abort();
    }
  };
  const bool pdl = ctx.pdl, early = ctx.matmul_early_trigger;
  const cuda::MatmulDecodeTable* table_before = ctx.matmul_decode_table;
  ctx.pdl = true;
  ctx.matmul_early_trigger = true;
  cuda::MatmulDecodeTable table;
  ctx.matmul_decode_table = &table;

  std::printf("\nlayer chain: each op %d times in a row (its fusion, programmatic dependent launch), best "
              "candidate; then the four in layer order\n", kLayers);
  std::string json = "{\"ops\": [";
  double ideal_layer_us = 0.0, alone_layer_us = 0.0;
  // Per op of the layer: the fastest candidate, and the fastest whose weight ring leaves room for two
  // blocks per multiprocessor (at most 64 KB: what the backend's tuner prefers).
  constexpr size_t kTwoBlockRing = 64 * 1024;
  std::vector<cuda::MatmulDecodeShapeConfig> chosen, chosen_small;
  for (int op = 0; op < 10; ++op) {
    const ChainOp& o = ops[op];
    const double bytes = static_cast<double>(o.n * o.k) * 2;
    const double ideal_us = bytes / (copy_gbps * 1e3);
    double best_us = 1e30, best_small_us = 1e30;
    cuda::MatmulDecodeConfig best{}, best_small{};
    for (const cuda::MatmulDecodeConfig& cfg : cuda::matmul_decode_candidates(o.n, o.k, DType::BF16)) {
      table.entries = {{o.n, o.k, DType::BF16, cfg}};
      const double us = time_per_call_ms(ctx.stream, kLayers, samples, [&](int i) { call(op, i); }) * 1e3;
      if (us < best_us) {
        best_us = us;
        best = cfg;
      }
      if (us < best_small_us && cuda::matmul_decode_ring_bytes(cfg, DType::BF16) <= kTwoBlockRing) {
        best_small_us = us;
        best_small = cfg;
      }
    }
    if (op < 4) {
      ideal_layer_us += ideal_us;
      alone_layer_us += best_us;
      chosen.push_back({o.n, o.k, DType::BF16, best});
      chosen_small.push_back({o.n, o.k, DType::BF16, best_small});
    }
    std::printf("  %-32s %6lld x %5lld: %7.2f us  %5.0f GB/s  %.3f of copy   [%s]\n", o.name,
                static_cast<long long>(o.n), static_cast<long long>(o.k), best_us, bytes / (best_us * 1e3),
                ideal_us / best_us, config_string(best).c_str());
    JsonWriter e;
    e.raw(op == 0 ? "{" : ", {");
    e.kv("op", std::string(o.name));
    e.kv("us", best_us);
    e.kv("ideal_us", ideal_us);
    e.kv("fraction_of_copy", ideal_us / best_us);
    e.kv("config", config_string(best), false);
    e.raw("}");
    json += e.out;
  }
  auto time_layer = [&](const std::vector<cuda::MatmulDecodeShapeConfig>& configs) {
    table.entries = configs;
    return time_per_call_ms(ctx.stream, kLayers, samples, [&](int layer) {
             for (int op = 0; op < 4; ++op) call(op, layer);
           }) * 1e3;
  };
  const double layer_us = time_layer(chosen), layer_small_us = time_layer(chosen_small);
  std::printf("  a layer's four in order: %.2f us per layer (ops alone %.2f; at the copy bandwidth %.2f): %.3f of copy\n",
              layer_us, alone_layer_us, ideal_layer_us, ideal_layer_us / layer_us);
  std::printf("  the same with rings of at most 64 KB (two blocks per multiprocessor): %.2f us per layer, %.3f of copy\n",
              layer_small_us, ideal_layer_us / layer_small_us);
  table.entries = chosen_small;
  // A handoff for the first layer's q/k/v to read before the first replay (later ones read the last down's).
  cuda::matmul_add(ctx, attn, weight(1, 0), Tensor(), scr, residual, &handoff);
  const double step_us = time_per_call_ms(ctx.stream, kLayers, samples, step_layer) * 1e3;
  std::printf("  as the decode step runs them (norm handoffs, the MLP fused; rings of at most 64 KB): %.2f us per "
              "layer, %.3f of copy\n", step_us, ideal_layer_us / step_us);
  const std::string timeline = trace_layer(ctx, table, chosen_small, call, kLayers);
  JsonWriter e;
  e.kv("layer_us_two_block_rings", layer_small_us);
  e.kv("layer_us", layer_us);
  e.kv("layer_us_step_order", step_us);
  e.kv("ideal_layer_us", ideal_layer_us);
  e.kv("fraction_of_copy", ideal_layer_us / layer_us, false);
  json += "], " + e.out + ", \"timeline\": " + timeline + "}";
  ctx.pdl = pdl;
  ctx.matmul_early_trigger = early;
  ctx.matmul_decode_table = table_before;
  return json;
}

int run(const Options& opt) {
  cudaDeviceProp prop{};
  if (!bench_device(prop)) return 1;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("device: %s, %d SMs, L2 %.0f MB, driver %d, runtime %d\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize / 1e6, driver, runtime);
  const int samples = opt.quick ? 5 : 15;

  cuda::Context ctx;
  BENCH_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  if (cublasLtCreate(&ctx.lt) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasLtCreate failed\n");
    return 1;
  }
  DeviceArray workspace(size_t{32} << 20);
  const int prefill_rows = 4096;
  DeviceArray scratch(cuda::matmul_scratch_bytes(prefill_rows, 12288));
  ctx.lt_workspace = workspace.get();
  ctx.lt_workspace_bytes = workspace.bytes();
  ctx.matmul_scratch = scratch.get();
  ctx.matmul_scratch_bytes = scratch.bytes();
  ctx.matmul_split_region = cuda::matmul_split_region_bytes(prefill_rows, 12288);  // norm handoffs, as the backend
  ctx.sm_count = prop.multiProcessorCount;
  ctx.max_rows = prefill_rows;
  // The matmul's switches (one-row instance, spreads, x-shared kernel), read as CudaBackend::create does.
  if (const Status s = cuda::read_matmul_switches(ctx); !s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }

  JsonWriter json;
  json.raw("{");
  json.kv("device", std::string(prop.name));
  json.kv("sm_count", prop.multiProcessorCount);
  json.kv("driver", driver);

  // The ceiling: a device-to-device copy of 1 GiB, bytes read plus bytes written.
  double copy_gbps = 0.0;
  {
    const size_t bytes = size_t{1} << 30;
    DeviceArray src(bytes), dst(bytes);
    BENCH_CUDA(cudaMemsetAsync(src.get(), 1, bytes, ctx.stream));
    const double ms = time_ms(ctx.stream, samples, [&] {
      BENCH_CUDA(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    });
    copy_gbps = 2.0 * bytes / (ms * 1e-3) / 1e9;
    std::printf("device copy (1 GiB, read + write): %.0f GB/s  <- decode ceiling\n\n", copy_gbps);
  }
  json.kv("copy_gbps_read_plus_write", copy_gbps);
  if (opt.chain_only) {
    json.raw("\"layer_chain\": " + layer_chain(ctx, copy_gbps, samples) + "}");
    const int rc = write_json(opt.json_path, json.out);
    cublasLtDestroy(ctx.lt);
    cudaStreamDestroy(ctx.stream);
    return rc;
  }

  const int64_t max_k = 12288;
  DeviceArray x(static_cast<size_t>(prefill_rows) * max_k * 4);
  fill_f32<<<1024, 256, 0, ctx.stream>>>(static_cast<float*>(x.get()), int64_t{prefill_rows} * max_k, 1, 1.0f);
  BENCH_CUDA(cudaGetLastError());

  std::string decode_json, candidate_json;
  std::printf("decode, BF16 w, default configuration: us per call, GB/s of weights, %% of copy bandwidth\n");
  std::printf("%-14s %7s %6s |", "shape", "n", "k");
  for (int rows : kDecodeRows) std::printf(" %17s", ("rows " + std::to_string(rows)).c_str());
  std::printf("\n");
  for (const Shape& s : kShapes) {
    const size_t w_bytes = static_cast<size_t>(s.n * s.k) * 2;
    const int copies = static_cast<int>(std::max<size_t>(2, (4 * static_cast<size_t>(prop.l2CacheSize) + w_bytes - 1) / w_bytes));
    DeviceArray w(w_bytes * copies), y(static_cast<size_t>(kMaxDecodeRows * s.n) * 4);
    fill_bf16<<<4096, 256, 0, ctx.stream>>>(static_cast<__nv_bfloat16*>(w.get()), s.n * s.k * copies, 2, 0.05f);
    BENCH_CUDA(cudaGetLastError());
    const int calls = std::max(copies, 20);
    auto decode_call = [&](const cuda::MatmulDecodeConfig& cfg, int rows) {
      return [&, cfg, rows](int i) {
        const Tensor xt(x.get(), DType::F32, {rows, s.k});
        const Tensor wt(static_cast<char*>(w.get()) + (i % copies) * w_bytes, DType::BF16, {s.n, s.k});
        const Tensor yt(y.get(), DType::F32, {rows, s.n});
        cuda::matmul_decode(ctx, xt, wt, Tensor(), yt, cfg);
      };
    };
    const cuda::MatmulDecodeConfig def = cuda::matmul_decode_default_config(s.n, s.k, DType::BF16);
    std::printf("%-14s %7lld %6lld |", s.name, static_cast<long long>(s.n), static_cast<long long>(s.k));
    for (int rows : kDecodeRows) {
      const double ms = time_per_call_ms(ctx.stream, calls, samples, decode_call(def, rows));
      const double gbps = w_bytes / (ms * 1e-3) / 1e9;
      std::printf(" %6.1f %5.0f %3.0f%%", ms * 1e3, gbps, 100.0 * gbps / copy_gbps);
      JsonWriter e;
      e.raw(decode_json.empty() ? "{" : ", {");
      e.kv("shape", std::string(s.name));
      e.kv("n", static_cast<double>(s.n));
      e.kv("k", static_cast<double>(s.k));
      e.kv("rows", rows);
      e.kv("config", config_string(def));
      e.kv("us", ms * 1e3);
      e.kv("weight_gbps", gbps);
      e.kv("fraction_of_copy", gbps / copy_gbps, false);
      e.raw("}");
      decode_json += e.out;
    }
    std::printf("   [%s]\n", config_string(def).c_str());
    std::fflush(stdout);

    if (!opt.quick) {
      const std::vector<cuda::MatmulDecodeConfig> candidates = cuda::matmul_decode_candidates(s.n, s.k, DType::BF16);
      double best_ms = 1e30;
      cuda::MatmulDecodeConfig best = def;
      std::vector<std::string> lines;
      for (const cuda::MatmulDecodeConfig& cfg : candidates) {
        const double ms1 = time_per_call_ms(ctx.stream, calls, samples, decode_call(cfg, 1));
        const double ms8 = time_per_call_ms(ctx.stream, calls, samples, decode_call(cfg, 8));
        if (ms1 < best_ms) {
          best_ms = ms1;
          best = cfg;
        }
        char line[160];
        std::snprintf(line, sizeof line, "    %-34s rows 1: %7.1f us %5.0f GB/s   rows 8: %7.1f us%s",
                      config_string(cfg).c_str(), ms1 * 1e3, w_bytes / (ms1 * 1e-3) / 1e9, ms8 * 1e3,
                      cfg == def ? "  (default)" : "");
        lines.push_back(line);
        JsonWriter e;
        e.raw(candidate_json.empty() ? "{" : ", {");
        e.kv("shape", std::string(s.name));
        e.kv("config", config_string(cfg));
        e.kv("features_per_lane", cfg.features_per_lane);
        e.kv("rounds_in_flight", cfg.rounds_in_flight);
        e.kv("feature_warps", cfg.feature_warps);
        e.kv("k_warps", cfg.k_warps);
        e.kv("mma_stages", cfg.mma_stages);
        e.kv("us_rows_1", ms1 * 1e3);
        e.kv("us_rows_8", ms8 * 1e3, false);
        e.raw("}");
        candidate_json += e.out;
      }
      std::printf("  %zu candidates for %s:\n", candidates.size(), s.name);
      for (const std::string& l : lines) std::printf("%s\n", l.c_str());
      std::printf("  winner at 1 row: %s, %.1f us, %.0f GB/s (%.0f%% of copy)\n\n", config_string(best).c_str(),
                  best_ms * 1e3, w_bytes / (best_ms * 1e-3) / 1e9, 100.0 * w_bytes / (best_ms * 1e-3) / 1e9 / copy_gbps);
      std::fflush(stdout);
    }
  }
  json.raw("\"decode\": [" + decode_json + "], ");
  json.raw("\"candidates\": [" + candidate_json + "], ");

  // Prefill: cuBLASLt on the tensor cores, x rounded to BF16 first (included in the time).
  std::printf("\nprefill (cuBLASLt, BF16 tensor cores, f32 out; time includes rounding x to BF16)\n");
  std::string prefill_json;
  const int64_t prefill_shapes[][2] = {{4096, 4096}, {12288, 4096}, {4096, 12288}};
  for (const auto& nk : prefill_shapes) {
    const int64_t n = nk[0], k = nk[1], rows = prefill_rows;
    DeviceArray w(static_cast<size_t>(n * k) * 2), y(static_cast<size_t>(rows * n) * 4);
    fill_bf16<<<4096, 256, 0, ctx.stream>>>(static_cast<__nv_bfloat16*>(w.get()), n * k, 3, 0.05f);
    BENCH_CUDA(cudaGetLastError());
    const Tensor xt(x.get(), DType::F32, {rows, k}), wt(w.get(), DType::BF16, {n, k}), yt(y.get(), DType::F32, {rows, n});
    const char* path = cuda::matmul_path(ctx, xt, wt, Tensor(), yt);
    // Ten calls per sample, so that the host's work per call (a cuBLASLt heuristic query) overlaps the GPU's.
    const int calls = 10;
    const double ms = time_ms(ctx.stream, samples, [&] {
      for (int i = 0; i < calls; ++i) cuda::matmul(ctx, xt, wt, Tensor(), yt);
    }) / calls;
    const double tflops = 2.0 * rows * n * k / (ms * 1e-3) / 1e12;
    std::printf("  rows %lld x n %lld x k %lld: %8.1f us  %6.1f TFLOP/s  (path %s)\n", static_cast<long long>(rows),
                static_cast<long long>(n), static_cast<long long>(k), ms * 1e3, tflops, path);
    JsonWriter e;
    e.raw(prefill_json.empty() ? "{" : ", {");
    e.kv("rows", static_cast<double>(rows));
    e.kv("n", static_cast<double>(n));
    e.kv("k", static_cast<double>(k));
    e.kv("path", std::string(path));
    e.kv("us", ms * 1e3);
    e.kv("tflops", tflops, false);
    e.raw("}");
    prefill_json += e.out;
  }
  std::printf("  (dense BF16 ceiling: about 990 TFLOP/s by the datasheet; measured elsewhere on this GPU: ~790)\n");
  json.raw("\"prefill\": [" + prefill_json + "], ");
  json.raw("\"layer_chain\": " + layer_chain(ctx, copy_gbps, samples) + "}");

  const int rc = write_json(opt.json_path, json.out);
  cublasLtDestroy(ctx.lt);
  cudaStreamDestroy(ctx.stream);
  return rc;
}

}  // namespace
}  // namespace helium

int main(int argc, char** argv) {
  helium::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      opt.json_path = argv[++i];
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--chain") {
      opt.chain_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--quick] [--chain]\n", argv[0]);
      return 2;
    }
  }
  return helium::run(opt);
}
