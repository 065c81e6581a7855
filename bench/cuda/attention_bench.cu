// bench/cuda/attention_bench.cu — times helium::cuda::attention on Qwen3-8B's shape (32 query heads, 8 KV
// heads of 128, BF16 cache, pages of 16 positions handed out in shuffled order):
// - decode (split-KV path): 1 row at 1K, 8K and 32K context, and 64 rows at 2K each, as achieved GB/s of
//   KV traffic (K and V of every key read once per row: 2 x keys x 8 x 128 x 2 bytes) beside the
//   device-to-device copy bandwidth measured here (cudaMemcpyAsync of 1 GiB, bytes read plus bytes
//   written: DESIGN.md's decode ceiling). Each call reads a different layer's cache (together more than
//   1 GiB, several times the L2) and the calls are replayed from a CUDA graph, as the engine's decode
//   step is, so the figures are HBM figures without launch gaps. The 1K case is also run with the grid
//   sized for 32K positions (layout.max_keys = 32768), what a single graph captured for the whole
//   context capacity launches: the cost of the blocks that exit at once.
// - prefill (tensor-core path): one prompt of 4096 rows, causal, as ms per layer and TFLOP/s (4 flops
//   per query-key pair and head dimension: q·k and p·v), and the ms for Qwen3-8B's 36 layers.
// - the decode kernel's K/V traffic alone at 32K (no kernel around it): one head's 256 bytes per key, as
//   the partition kernel's blocks read it, against whole 2 KB rows of the cache — the same bytes — with as
//   many blocks resident as fit, and with four per multiprocessor (the 3-stage ring's residency).
// Times: median over replays after a warm-up.
//
//   helium_bench_cuda_attention [--json PATH] [--quick] [--only ROWS,CONTEXT] [--trace ROWS,CONTEXT]
//
// --only: the one decode case, for a profiler (e.g. ncu over its partition kernel); nothing else.
// --trace: one call of that case with the partition kernel's %globaltimer stamps (Context::attention_trace):
// where a block's life goes, when the blocks start and end, how many are live over time; nothing else.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"
#include "bench_cuda.h"

namespace helium {
namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kPageSize = 16, kLayers = 36;
constexpr int64_t kMaxContext = 32768;
constexpr int64_t kKvDim = int64_t{kKvHeads} * kHeadDim;

struct Options {
  std::string json_path;
  bool quick = false;
  int64_t only_rows = 0, only_context = 0;  // --only
  bool trace = false;                         // --trace (the same case)
};

__global__ void fill_bf16(__nv_bfloat16* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = (static_cast<uint64_t>(i) ^ seed) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    p[i] = __float2bfloat16(static_cast<float>(z >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f);
  }
}
__global__ void fill_f32(float* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = (static_cast<uint64_t>(i) ^ seed) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    p[i] = static_cast<float>(z >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  BENCH_CUDA(cudaMalloc(&p, bytes));
  return p;
}
template <class T>
T* upload(const std::vector<T>& v) {
  T* p = static_cast<T*>(device_alloc(v.size() * sizeof(T)));
  BENCH_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A paged BF16 cache for `sequences` sequences of `context` positions (shuffled pages), with q, out and
// the layout tensors of a batch with one row per sequence at its last position.
struct Workload {
  int64_t sequences = 0, context = 0, pages_per_seq = 0, slots = 0;
  void *k = nullptr, *v = nullptr;
  int32_t *tables = nullptr, *row_tables = nullptr, *prefix = nullptr;
  float *q = nullptr, *out = nullptr;

  Workload(int64_t sequences_, int64_t context_, cudaStream_t stream) : sequences(sequences_), context(context_) {
    pages_per_seq = (context + kPageSize - 1) / kPageSize;
    const int64_t pages = sequences * pages_per_seq;
    slots = pages * kPageSize;
    k = device_alloc(slots * kKvDim * 2);
    v = device_alloc(slots * kKvDim * 2);
    fill_bf16<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(k), slots * kKvDim, 1);
    fill_bf16<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(v), slots * kKvDim, 2);
    std::vector<int32_t> page_ids(pages);
    std::iota(page_ids.begin(), page_ids.end(), 0);
    std::shuffle(page_ids.begin(), page_ids.end(), std::mt19937(3));
    tables = upload(page_ids);  // table s = pages [s * pages_per_seq, (s + 1) * pages_per_seq)
    std::vector<int32_t> ids(sequences);
    std::iota(ids.begin(), ids.end(), 0);
    row_tables = upload(ids);
    prefix = upload(std::vector<int32_t>(sequences, static_cast<int32_t>(context)));
  }
  // q and out for batches of `rows` rows.
  void make_rows(int64_t rows, cudaStream_t stream) {
    q = static_cast<float*>(device_alloc(rows * kHeads * kHeadDim * 4));
    out = static_cast<float*>(device_alloc(rows * kHeads * kHeadDim * 4));
    fill_f32<<<256, 256, 0, stream>>>(q, rows * kHeads * kHeadDim, 4);
  }
  void release() {
    for (void* p : {k, v, static_cast<void*>(tables), static_cast<void*>(row_tables), static_cast<void*>(prefix),
                    static_cast<void*>(q), static_cast<void*>(out)})
      if (p != nullptr) cudaFree(p);
  }
  // The call for rows [first_row, first_row + rows) of row_tables / prefix.
  void attend(const cuda::Context& c, int64_t first_row, int64_t rows, int32_t max_keys) const {
    AttentionLayout layout;
    layout.page_size = kPageSize;
    layout.block_tables = Tensor(tables, DType::I32, {sequences, pages_per_seq});
    layout.row_table = Tensor(row_tables + first_row, DType::I32, {rows});
    layout.prefix_lens = Tensor(prefix + first_row, DType::I32, {rows});
    layout.max_keys = max_keys;
    const AttentionShape shape{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
    cuda::attention(c, Tensor(q, DType::F32, {rows, kHeads * kHeadDim}),
                    Tensor(k, DType::BF16, {slots, kKvDim}), Tensor(v, DType::BF16, {slots, kKvDim}), shape, layout,
                    Tensor(out, DType::F32, {rows, kHeads * kHeadDim}));
  }
};

// Captures `enqueue` (the calls of `layers` layers) on `stream` as one CUDA graph, replays it (3 warm-up
// replays, then `replays` timed ones) and returns the median µs per layer.
template <class Enqueue>
double replay_us_per_layer(cudaStream_t stream, int layers, int replays, Enqueue enqueue) {
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  enqueue();
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) BENCH_CUDA(cudaGraphLaunch(exec, stream));
  std::vector<double> us;
  for (int i = 0; i < replays; ++i) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    BENCH_CUDA(cudaGraphLaunch(exec, stream));
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1e3 * ms / layers);
  }
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return median(us);
}

struct DecodeResult {
  int64_t rows, context;
  int32_t max_keys;
  double us, gbps;
};

// `rows` rows of `context` keys each; every call of the graph reads another layer's cache.
DecodeResult time_decode(const cuda::Context& c, int64_t rows, int64_t context, int32_t max_keys, int replays) {
  const double layer_bytes = 2.0 * rows * context * kKvDim * 2;
  const int layers = static_cast<int>(std::clamp<double>(std::ceil(1.25 * (1 << 30) / layer_bytes), 4, 256));
  Workload w(rows * layers, context, c.stream);
  w.make_rows(rows, c.stream);
  BENCH_CUDA(cudaStreamSynchronize(c.stream));
  // The queries of every layer are the same rows; the tables differ.
  const double t = replay_us_per_layer(c.stream, layers, replays, [&] {
    for (int l = 0; l < layers; ++l) w.attend(c, l * rows, rows, max_keys);
  });
  w.release();
  return {rows, context, max_keys, t, layer_bytes / (t * 1e-6) / 1e9};
}

// The decode kernel's K/V traffic without the kernel: 1,024 blocks of 128 threads stream K then V of one
// row's 32K contiguous slots with plain 16-byte loads (8 in flight per thread) and fold them into a sink.
// Per head: block b reads head b % 8's 256 bytes of each of 256 keys (the partition kernel's pattern,
// 2 KB apart); whole rows: block b reads all heads of 32 keys (2 KB contiguous per key). The same bytes
// per block; whether the per-head pattern costs DRAM efficiency.
__global__ void __launch_bounds__(128) kv_pattern_kernel(const uint4* k, const uint4* v, int64_t keys, bool whole_rows,
                                                         unsigned* sink) {
  constexpr int64_t kRow16 = kKvDim * 2 / 16;  // 16-byte pieces of a key's row (all heads): 128
  constexpr int64_t kHead16 = kHeadDim * 2 / 16;  // of one head: 16
  const int64_t b = blockIdx.x;
  // Pieces of this block: per head, key i of 256 and piece j of 16; whole rows, key i of 32 and piece j of 128.
  const int64_t pieces = whole_rows ? 32 * kRow16 : 256 * kHead16;
  unsigned fold = 0;
  for (int kv = 0; kv < 2; ++kv) {
    const uint4* base = kv == 0 ? k : v;
    for (int64_t p0 = threadIdx.x; p0 < pieces; p0 += 128 * 8) {
      uint4 x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int64_t p = p0 + u * 128;
        int64_t at = -1;
        if (p < pieces) {
          if (whole_rows) at = (b * 32 + p / kRow16) * kRow16 + p % kRow16;
          else at = ((b / 8) * 256 + p / kHead16) * kRow16 + (b % 8) * kHead16 + p % kHead16;
        }
        x[u] = at >= 0 && at / kRow16 < keys ? __ldcs(base + at) : uint4{};
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) fold ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
    }
  }
  if (fold == 0x9e3779b9u) *sink = fold;  // never in practice; keeps the loads
}

// How kv_pattern_kernel is launched: the pattern, and the dynamic shared memory each block holds (0, or the
// partition kernel's ~54 KB, which leaves four blocks per multiprocessor as its 3-stage ring does).
struct KvPattern {
  const char* key;  // in the JSON
  const char* name;
  bool whole_rows;
  int smem_bytes;
};

void launch_kv_pattern(cudaStream_t stream, const KvPattern& p, const uint4* k, const uint4* v, int64_t keys,
                       unsigned* sink) {
  if (p.smem_bytes > 0)
    BENCH_CUDA(cudaFuncSetAttribute(kv_pattern_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, p.smem_bytes));
  kv_pattern_kernel<<<1024, 128, p.smem_bytes, stream>>>(k, v, keys, p.whole_rows, sink);
}

// µs per layer of kv_pattern_kernel over 32K keys, layers rotated over more than the L2 (graph replays).
double time_kv_pattern(cudaStream_t stream, const KvPattern& pattern, int replays) {
  constexpr int64_t keys = 32768;
  const int64_t layer_bytes = keys * kKvDim * 2;  // K (and as much V)
  const int layers = 10;
  auto* k = static_cast<uint4*>(device_alloc(layers * layer_bytes));
  auto* v = static_cast<uint4*>(device_alloc(layers * layer_bytes));
  auto* sink = static_cast<unsigned*>(device_alloc(4));
  BENCH_CUDA(cudaMemsetAsync(k, 1, layers * layer_bytes, stream));
  BENCH_CUDA(cudaMemsetAsync(v, 2, layers * layer_bytes, stream));
  const double t = replay_us_per_layer(stream, layers, replays, [&] {
    for (int l = 0; l < layers; ++l)
      launch_kv_pattern(stream, pattern, k + l * layer_bytes / 16, v + l * layer_bytes / 16, keys, sink);
  });
  for (void* p : {static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(sink)}) cudaFree(p);
  return t;
}

struct PrefillResult {
  int64_t rows;
  double ms, tflops;
};

PrefillResult time_prefill(const cuda::Context& c, int64_t rows, int replays) {
  Workload w(1, rows, c.stream);
  w.make_rows(rows, c.stream);
  std::vector<int32_t> table(rows, 0), prefix(rows);
  for (int64_t r = 0; r < rows; ++r) prefix[r] = static_cast<int32_t>(r + 1);
  cudaFree(w.row_tables);
  cudaFree(w.prefix);
  w.row_tables = upload(table);
  w.prefix = upload(prefix);
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) w.attend(c, 0, rows, static_cast<int32_t>(rows));
  std::vector<double> ms_list;
  for (int i = 0; i < replays; ++i) {
    BENCH_CUDA(cudaEventRecord(start, c.stream));
    w.attend(c, 0, rows, static_cast<int32_t>(rows));
    BENCH_CUDA(cudaEventRecord(stop, c.stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    ms_list.push_back(ms);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  w.release();
  const double ms = median(ms_list);
  const double pairs = static_cast<double>(rows) * (rows + 1) / 2;  // causal query-key pairs
  return {rows, ms, 4.0 * pairs * kHeadDim * kHeads / (ms * 1e-3) / 1e12};
}

// One call of `rows` rows of `context` keys with the partition kernel's stamps (after three calls over other
// layers' caches): per event, the median and 90th percentile over the blocks of its time since the block's
// start; the spread of the blocks' starts and ends; the blocks live every 2 us.
void print_trace(cuda::Context& c, int64_t rows, int64_t context) {
  constexpr int kEvents = cuda::kAttentionTraceEvents;
  const char* names[kEvents] = {"start", "slots staged", "wait released", "first chunk landed", "K phase done",
                                "softmax done", "V phase done", "partials written"};
  const int layers = 4;
  Workload w(rows * layers, context, c.stream);
  w.make_rows(rows, c.stream);
  for (int l = 0; l + 1 < layers; ++l) w.attend(c, l * rows, rows, static_cast<int32_t>(context));
  const int64_t blocks =
      kKvHeads * cuda::max_partition_count(context, c.attention_tiers) * rows;
  auto* trace = static_cast<unsigned long long*>(device_alloc(blocks * kEvents * 8));
  BENCH_CUDA(cudaMemsetAsync(trace, 0, blocks * kEvents * 8, c.stream));
  c.attention_trace = trace;
  w.attend(c, (layers - 1) * rows, rows, static_cast<int32_t>(context));
  c.attention_trace = nullptr;
  std::vector<unsigned long long> t(static_cast<size_t>(blocks * kEvents));
  BENCH_CUDA(cudaMemcpyAsync(t.data(), trace, t.size() * 8, cudaMemcpyDeviceToHost, c.stream));
  BENCH_CUDA(cudaStreamSynchronize(c.stream));
  cudaFree(trace);
  w.release();
  // The blocks with keys (the others stamp their start only, then exit): their starts and ends.
  std::vector<int64_t> live;
  unsigned long long t0 = ~0ull;
  for (int64_t b = 0; b < blocks; ++b)
    if (t[b * kEvents] != 0 && t[b * kEvents + kEvents - 1] != 0) {
      live.push_back(b);
      t0 = std::min(t0, t[b * kEvents]);
    }
  auto pct = [](const std::vector<double>& sorted, double q) {
    return sorted.empty() ? 0.0 : sorted[static_cast<size_t>(q * (sorted.size() - 1))];
  };
  std::printf("decode attention, %lld rows of %lld keys: %lld blocks with keys (stamps in us)\n",
              static_cast<long long>(rows), static_cast<long long>(context), static_cast<long long>(live.size()));
  std::printf("  %-20s %9s %9s\n", "since block start", "median", "p90");
  for (int e = 1; e < kEvents; ++e) {
    std::vector<double> d;
    for (int64_t b : live) d.push_back(1e-3 * static_cast<double>(t[b * kEvents + e] - t[b * kEvents]));
    std::sort(d.begin(), d.end());
    std::printf("  %-20s %9.2f %9.2f\n", names[e], pct(d, 0.5), pct(d, 0.9));
  }
  std::vector<double> starts, ends;  // in block order (paired), sorted copies for the percentiles
  for (int64_t b : live) {
    starts.push_back(1e-3 * static_cast<double>(t[b * kEvents] - t0));
    ends.push_back(1e-3 * static_cast<double>(t[b * kEvents + kEvents - 1] - t0));
  }
  std::vector<double> sorted_starts = starts, sorted_ends = ends;
  std::sort(sorted_starts.begin(), sorted_starts.end());
  std::sort(sorted_ends.begin(), sorted_ends.end());
  const double last_end = pct(sorted_ends, 1.0);
  std::printf("  block starts since the first: median %.2f, p90 %.2f, last %.2f; ends: first %.2f, median %.2f, last %.2f\n",
              pct(sorted_starts, 0.5), pct(sorted_starts, 0.9), pct(sorted_starts, 1.0), pct(sorted_ends, 0.0),
              pct(sorted_ends, 0.5), last_end);
  std::printf("  blocks live every 2 us:");
  for (double at = 0; at <= last_end; at += 2.0) {
    int n = 0;
    for (size_t i = 0; i < starts.size(); ++i) n += starts[i] <= at && at < ends[i];
    std::printf(" %d", n);
  }
  std::printf("\n");
}

int run(const Options& opt) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "helium_bench_cuda_attention: no CUDA device, nothing to time\n");
    return 0;
  }
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

  cuda::Context c;
  BENCH_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  c.sm_count = prop.multiProcessorCount;
  c.max_rows = kMaxDecodeRows;
  c.max_context = kMaxContext;
  // Room for the most partitions any scheme below makes (64 keys each everywhere).
  c.attention_scratch_floats =
      cuda::attention_scratch_floats(kMaxDecodeRows, kHeads, kHeadDim, kMaxContext, {1 << 30, 1 << 30, 1 << 30});
  c.attention_scratch = static_cast<float*>(device_alloc(c.attention_scratch_floats * sizeof(float)));

  // The ceiling: a device-to-device copy of 1 GiB, bytes read plus bytes written.
  double copy_gbps = 0;
  {
    const size_t bytes = size_t{1} << 30;
    void* a = device_alloc(bytes);
    void* b = device_alloc(bytes);
    BENCH_CUDA(cudaMemsetAsync(a, 1, bytes, c.stream));
    cudaEvent_t start, stop;
    BENCH_CUDA(cudaEventCreate(&start));
    BENCH_CUDA(cudaEventCreate(&stop));
    std::vector<double> gbps;
    for (int i = 0; i < 12; ++i) {
      BENCH_CUDA(cudaEventRecord(start, c.stream));
      BENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c.stream));
      BENCH_CUDA(cudaEventRecord(stop, c.stream));
      BENCH_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (i >= 2) gbps.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);
    }
    copy_gbps = median(gbps);
    BENCH_CUDA(cudaEventDestroy(start));
    BENCH_CUDA(cudaEventDestroy(stop));
    cudaFree(a);
    cudaFree(b);
  }
  std::printf("device copy (1 GiB, read + write): %.0f GB/s  <- decode ceiling\n\n", copy_gbps);

  if (opt.trace) {
    print_trace(c, opt.only_rows, opt.only_context);
    return 0;
  }
  if (opt.only_rows > 0) {
    const DecodeResult r = time_decode(c, opt.only_rows, opt.only_context, static_cast<int32_t>(opt.only_context), 5);
    std::printf("decode attention, %lld rows of %lld keys: %.1f us per call, %.0f GB/s of KV (%.0f%% of copy)\n",
                static_cast<long long>(r.rows), static_cast<long long>(r.context), r.us, r.gbps, 100.0 * r.gbps / copy_gbps);
    return 0;
  }
  const int replays = opt.quick ? 5 : 21;
  std::printf("decode attention, Qwen3-8B shape, BF16 cache, page %d (graph of one call per layer):\n", kPageSize);
  std::printf("  %4s %7s %9s %9s %8s %7s\n", "rows", "context", "max_keys", "us/call", "KV GB/s", "of copy");
  std::vector<DecodeResult> decode;
  const std::vector<std::array<int64_t, 3>> cases = {
      {1, 1024, 1024}, {1, 1024, kMaxContext}, {1, 8192, 8192}, {1, 32768, 32768}, {64, 2048, 2048}};
  for (const auto& cs : cases) {
    const DecodeResult r = time_decode(c, cs[0], cs[1], static_cast<int32_t>(cs[2]), replays);
    std::printf("  %4lld %7lld %9d %9.1f %8.0f %6.0f%%\n", static_cast<long long>(r.rows),
                static_cast<long long>(r.context), r.max_keys, r.us, r.gbps, 100.0 * r.gbps / copy_gbps);
    decode.push_back(r);
  }

  // The partition size at each context (attention_partitions.h picks by key count; here each size is
  // forced everywhere), 1 row.
  std::printf("\ndecode attention, 1 row, us per call by keys per partition (forced everywhere):\n");
  std::printf("  %7s %9s %9s %9s %9s %10s\n", "context", "P=64", "P=128", "P=256", "P=512", "default P");
  struct Sweep {
    int64_t context;
    double us[4];
  };
  std::vector<Sweep> sweep;
  const cuda::PartitionTiers tiers = c.attention_tiers;
  for (int64_t context : {int64_t{1024}, int64_t{2048}, int64_t{4096}, int64_t{8192}, int64_t{16384}, int64_t{32768}}) {
    Sweep row{context, {}};
    constexpr int kAll = 1 << 30;
    const cuda::PartitionTiers schemes[4] = {{kAll, kAll, kAll}, {0, kAll, kAll}, {0, 0, kAll}, {0, 0, 0}};
    for (int i = 0; i < 4; ++i) {
      c.attention_tiers = schemes[i];
      row.us[i] = time_decode(c, 1, context, static_cast<int32_t>(context), replays).us;
    }
    std::printf("  %7lld %9.1f %9.1f %9.1f %9.1f %10d\n", static_cast<long long>(context), row.us[0], row.us[1],
                row.us[2], row.us[3], cuda::partition_keys(static_cast<int>(context), tiers));
    sweep.push_back(row);
  }
  c.attention_tiers = tiers;

  // Keys and values loaded without an L2 hint (HELIUM_CUDA_KV_POLICY=normal) and with evict_first (the
  // default), 1 row.
  std::printf("\ndecode attention, 1 row, us per call: keys and values unhinted / evict_first (default):\n");
  std::vector<std::array<double, 3>> kv_policy;
  const bool kv_default = c.kv_evict_first;
  for (int64_t context : {int64_t{1024}, int64_t{8192}, int64_t{32768}}) {
    c.kv_evict_first = false;
    const double plain = time_decode(c, 1, context, static_cast<int32_t>(context), replays).us;
    c.kv_evict_first = true;
    const double first = time_decode(c, 1, context, static_cast<int32_t>(context), replays).us;
    c.kv_evict_first = kv_default;
    std::printf("  %7lld %9.1f %9.1f\n", static_cast<long long>(context), plain, first);
    kv_policy.push_back({static_cast<double>(context), plain, first});
  }

  // What the partition kernel's arithmetic and the merge cost: the same calls with the kernel streaming its
  // K/V through the ring and computing nothing (HELIUM_CUDA_OMIT=attn_math: the floor of this grid and
  // ring), and without the merge kernel, 1 row.
  std::printf("\ndecode attention, 1 row, us per call: as is / K/V streamed, no arithmetic / no merge:\n");
  std::vector<std::array<double, 4>> parts;
  for (int64_t context : {int64_t{1024}, int64_t{8192}, int64_t{32768}}) {
    std::array<double, 4> r{static_cast<double>(context)};
    const unsigned omits[3] = {0u, cuda::kOmitAttnMath, cuda::kOmitMerge};
    for (int i = 0; i < 3; ++i) {
      c.omit = omits[i];
      r[i + 1] = time_decode(c, 1, context, static_cast<int32_t>(context), replays).us;
    }
    c.omit = 0;
    std::printf("  %7lld %9.1f %9.1f %9.1f\n", static_cast<long long>(context), r[1], r[2], r[3]);
    parts.push_back(r);
  }

  // The merge of up to 16 partitions a row: by the merge kernel (the default), and by the partition
  // kernel's clusters (Context::attention_cluster_merge_max; sm_90 on), 1 row; the graph of the 1K steps
  // has max_keys 2,048 (its key bucket).
  std::vector<std::array<double, 4>> cluster_merge;
  const int cluster_default = c.attention_cluster_merge_max;
  const int cluster_max = prop.major >= 9 ? 16 : 0;
  std::printf("\ndecode attention, 1 row, us per call: merge kernel / clusters merge%s:\n",
              cluster_max > 0 ? "" : " (no clusters on this device: the merge kernel twice)");
  const std::array<int64_t, 2> cluster_cases[] = {{1024, 1024}, {1024, 2048}, {2048, 2048}};  // keys, max_keys
  for (const std::array<int64_t, 2>& cs : cluster_cases) {
    std::array<double, 4> r{static_cast<double>(cs[0]), static_cast<double>(cs[1])};
    c.attention_cluster_merge_max = 0;
    r[2] = time_decode(c, 1, cs[0], static_cast<int32_t>(cs[1]), replays).us;
    c.attention_cluster_merge_max = cluster_max;
    r[3] = time_decode(c, 1, cs[0], static_cast<int32_t>(cs[1]), replays).us;
    c.attention_cluster_merge_max = cluster_default;
    std::printf("  %7lld keys, max_keys %5lld %9.1f %9.1f\n", static_cast<long long>(cs[0]),
                static_cast<long long>(cs[1]), r[2], r[3]);
    cluster_merge.push_back(r);
  }

  // The partition kernel's K/V traffic alone (kv_pattern_kernel): one head's 256 bytes per key against
  // whole 2 KB rows, the same bytes, 32K keys; also with the partition kernel's residency (4 per SM).
  const double kv_bytes_32k = 2.0 * 32768 * kKvDim * 2;
  const KvPattern patterns[] = {{"per_head", "one head's 256 B per key", false, 0},
                                {"whole_rows", "whole 2 KB rows", true, 0},
                                {"per_head_4_per_sm", "one head's, 4 blocks per SM (54 KB shared each)", false, 54 << 10},
                                {"whole_rows_4_per_sm", "whole rows, 4 blocks per SM", true, 54 << 10}};
  std::printf("\nK/V of 32K keys streamed alone (1,024 blocks of 128 threads, plain loads, 8 x 16 B in flight per thread):\n");
  std::vector<std::pair<std::string, double>> pattern_us;
  for (const KvPattern& pattern : patterns) {
    const double us = time_kv_pattern(c.stream, pattern, replays);
    std::printf("  %-56s %7.1f us (%3.0f%% of copy)\n", pattern.name, us,
                100.0 * kv_bytes_32k / (us * 1e-6) / 1e9 / copy_gbps);
    pattern_us.emplace_back(pattern.key, us);
  }

  const PrefillResult p = time_prefill(c, 4096, opt.quick ? 3 : 11);
  std::printf("\nprefill attention, 4096 rows (one causal prompt), Qwen3-8B shape, BF16 cache:\n");
  std::printf("  %.3f ms per layer, %.0f TFLOP/s, %.1f ms for %d layers\n", p.ms, p.tflops, p.ms * kLayers, kLayers);

  if (!opt.json_path.empty()) {
    std::ostringstream j;
    j << "{\"device\": \"" << prop.name << "\", \"sm_count\": " << prop.multiProcessorCount << ", \"driver\": " << driver
      << ", \"copy_gbps_read_plus_write\": " << copy_gbps << ", \"shape\": {\"n_heads\": " << kHeads
      << ", \"n_kv_heads\": " << kKvHeads << ", \"head_dim\": " << kHeadDim << ", \"kv_dtype\": \"BF16\", \"page_size\": "
      << kPageSize << "}, \"decode\": [";
    for (size_t i = 0; i < decode.size(); ++i)
      j << (i ? ", " : "") << "{\"rows\": " << decode[i].rows << ", \"context\": " << decode[i].context
        << ", \"max_keys\": " << decode[i].max_keys << ", \"us_per_call\": " << decode[i].us
        << ", \"kv_gbps\": " << decode[i].gbps << ", \"fraction_of_copy\": " << decode[i].gbps / copy_gbps << "}";
    j << "], \"partition_sweep_us\": [";
    for (size_t i = 0; i < sweep.size(); ++i)
      j << (i ? ", " : "") << "{\"context\": " << sweep[i].context << ", \"p64\": " << sweep[i].us[0]
        << ", \"p128\": " << sweep[i].us[1] << ", \"p256\": " << sweep[i].us[2]
        << ", \"p512\": " << sweep[i].us[3] << "}";
    j << "], \"kv_policy_us\": [";
    for (size_t i = 0; i < kv_policy.size(); ++i)
      j << (i ? ", " : "") << "{\"context\": " << kv_policy[i][0] << ", \"normal\": " << kv_policy[i][1]
        << ", \"evict_first\": " << kv_policy[i][2] << "}";
    j << "], \"parts_us\": [";
    for (size_t i = 0; i < parts.size(); ++i)
      j << (i ? ", " : "") << "{\"context\": " << parts[i][0] << ", \"as_is\": " << parts[i][1]
        << ", \"no_arithmetic\": " << parts[i][2] << ", \"no_merge\": " << parts[i][3] << "}";
    j << "], \"cluster_merge_us\": [";
    for (size_t i = 0; i < cluster_merge.size(); ++i)
      j << (i ? ", " : "") << "{\"context\": " << cluster_merge[i][0] << ", \"max_keys\": " << cluster_merge[i][1]
        << ", \"merge_kernel\": " << cluster_merge[i][2] << ", \"clusters\": " << cluster_merge[i][3] << "}";
    j << "], \"kv_pattern_32k_us\": {";
    for (size_t i = 0; i < pattern_us.size(); ++i)
      j << (i ? ", " : "") << "\"" << pattern_us[i].first << "\": " << pattern_us[i].second;
    j << "}";
    j << ", \"prefill\": {\"rows\": " << p.rows << ", \"ms_per_layer\": " << p.ms << ", \"tflops\": " << p.tflops
      << ", \"ms_36_layers\": " << p.ms * kLayers << "}}";
    FILE* f = std::fopen(opt.json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", opt.json_path.c_str());
      return 1;
    }
    std::fprintf(f, "%s\n", j.str().c_str());
    std::fclose(f);
    std::printf("wrote %s\n", opt.json_path.c_str());
  }
  cudaFree(c.attention_scratch);
  cudaStreamDestroy(c.stream);
  return 0;
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
    } else if ((a == "--only" || a == "--trace") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%lld,%lld", reinterpret_cast<long long*>(&opt.only_rows),
                           reinterpret_cast<long long*>(&opt.only_context)) == 2 &&
               opt.only_rows > 0 && opt.only_rows <= helium::kMaxDecodeRows && opt.only_context > 0 &&
               opt.only_context <= helium::kMaxContext) {
      opt.trace = a == "--trace";
      ++i;
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--quick] [--only ROWS,CONTEXT] [--trace ROWS,CONTEXT]\n", argv[0]);
      return 2;
    }
  }
  return helium::run(opt);
}
