// bench/cuda/stream_bench.cu — the floor of a kernel-per-op decode step: how close to the copy bandwidth
// a chain of kernels that do nothing but stream their bytes gets, when the chain has the byte counts and
// the kernel boundaries of a Qwen3-8B decode step (per layer: q/k/v weights, two small kernels around
// the attention's K/V at a 1K context, o_proj, gate/up, down; then lm_head). No arithmetic, no data
// dependencies beyond what the launch order imposes: whatever this chain loses to the copy bandwidth, a
// real step of separate kernels loses too, so it prices the kernel boundaries themselves.
//
// Every kernel reads its own region of one buffer larger than the L2 (as a model's layers do) with 16-byte
// streaming loads from a grid of `blocks per SM` × SMs blocks (the small kernels: fixed small grids), and
// the step is captured as one CUDA graph and replayed. Variants:
// - blocks per multiprocessor and loads in flight per thread (the bytes in flight),
// - programmatic dependent launch: off; on, each kernel waiting for its predecessor before its first
//   load ("strict"); on, the first batch of loads issued before the wait ("early", what the decode
//   matmul does with its weight ring),
// - shared memory per block: none (the next kernel's blocks can sit beside the running ones) or enough
//   that a multiprocessor holds only the kernel's own blocks (as the decode matmul's weight ring does).
// Also: each op size alone (36 kernels of one size), and one kernel reading everything.
//
//   helium_bench_cuda_stream [--json PATH] [--replays N]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.cuh"
#include "bench_cuda.h"

namespace {

enum PdlMode : int { kPdlOff = 0, kPdlStrict = 1, kPdlEarly = 2 };

// With stage_n16 > 0, every block first reads that many 16-byte words of `stage` (after the wait) and
// meets at a barrier before it folds anything: the decode matmul's staging of x (from the L2).
template <int U>
__global__ void __launch_bounds__(256) stream_kernel(const uint4* __restrict__ src, int64_t n16, uint32_t* sink,
                                                     int pdl, const uint4* __restrict__ stage, int stage_n16) {
  extern __shared__ uint32_t reserve[];  // occupancy only
  if (pdl != kPdlOff) helium::cuda::pdl_launch_dependents();
  auto stage_x = [&] {
    uint32_t s = 0;
    for (int i = threadIdx.x; i < stage_n16; i += blockDim.x) {
      const uint4 v = stage[i];
      s ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (stage_n16 > 0) {
      reserve[threadIdx.x] = s;
      __syncthreads();
    }
  };
  if (pdl == kPdlStrict) helium::cuda::pdl_wait();
  if (pdl != kPdlEarly) stage_x();
  bool waited = pdl != kPdlEarly;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n16; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = i + u * stride;
      v[u] = j < n16 ? __ldcs(src + j) : make_uint4(0, 0, 0, 0);
    }
    if (!waited) {
      helium::cuda::pdl_wait();
      stage_x();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (!waited) {
    helium::cuda::pdl_wait();
    stage_x();
  }
  if ((acc ^ reserve[threadIdx.x]) == 0x9e3779b9u) {  // data dependent: the compiler keeps every load
    sink[blockIdx.x] = acc;
  }
}

struct Op {
  const char* name;
  size_t bytes;
  int grid;  // 0: blocks per SM × SMs
};

struct Variant {
  int blocks_per_sm, loads, pdl;
  size_t smem;
  int stage_bytes = 0;  // x staged by every block of the large kernels
};

using KernelFn = void (*)(const uint4*, int64_t, uint32_t*, int, const uint4*, int);
KernelFn kernel_for(int loads) {
  switch (loads) {
    case 2: return stream_kernel<2>;
    case 4: return stream_kernel<4>;
    case 8: return stream_kernel<8>;
    default: return stream_kernel<16>;
  }
}

int g_sms = 0;

void launch(cudaStream_t stream, const Variant& v, int grid, const uint4* src, size_t bytes, uint32_t* sink) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(256);
  config.dynamicSmemBytes = v.smem;
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = v.pdl != kPdlOff ? 1 : 0;
  config.dynamicSmemBytes = std::max<size_t>(v.smem, 1024);  // stage_x's barrier slots
  const int stage_n16 = grid == v.blocks_per_sm * g_sms ? v.stage_bytes / 16 : 0;
  BENCH_CUDA(cudaLaunchKernelEx(&config, kernel_for(v.loads), src, static_cast<int64_t>(bytes / 16), sink, v.pdl,
                                reinterpret_cast<const uint4*>(sink), stage_n16));
}

// Median µs of one replay of `ops` (each reading the next region of buf) as a graph.
double time_chain_us(cudaStream_t stream, const std::vector<Op>& ops, const Variant& v, int sms, const char* buf,
                     uint32_t* sink, int replays) {
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  size_t offset = 0;
  for (const Op& op : ops) {
    launch(stream, v, op.grid > 0 ? op.grid : v.blocks_per_sm * sms, reinterpret_cast<const uint4*>(buf + offset),
           op.bytes, sink);
    offset += (op.bytes + 255) / 256 * 256;
  }
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
    us.push_back(ms * 1e3);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

size_t total_bytes(const std::vector<Op>& ops) {
  size_t t = 0;
  for (const Op& op : ops) t += op.bytes;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int replays = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--replays") && i + 1 < argc) replays = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: helium_bench_cuda_stream [--json PATH] [--replays N]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  if (!bench_device(prop)) return 1;
  const int sms = prop.multiProcessorCount;
  g_sms = sms;
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int loads : {2, 4, 8, 16})
    BENCH_CUDA(cudaFuncSetAttribute(kernel_for(loads), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(prop.sharedMemPerBlockOptin)));

  // Qwen3-8B, BF16, a 1K context: the bytes each kernel of a decode step reads.
  const size_t hidden = 4096, inter = 12288, kv_dim = 1024, vocab = 151936, layers = 36, context = 1024;
  std::vector<Op> step;
  for (size_t l = 0; l < layers; ++l) {
    step.push_back({"qkv", (hidden + 2 * kv_dim) * hidden * 2, 0});
    step.push_back({"prologue", 64 << 10, 32});
    step.push_back({"attention", context * kv_dim * 2 * 2, 128});
    step.push_back({"merge", 64 << 10, 32});
    step.push_back({"o_proj", hidden * hidden * 2, 0});
    step.push_back({"gate_up", 2 * inter * hidden * 2, 0});
    step.push_back({"down", hidden * inter * 2, 0});
  }
  step.push_back({"lm_head", vocab * hidden * 2, 0});
  const size_t step_bytes = total_bytes(step);
  const size_t buf_bytes = step_bytes + step.size() * 256;
  char* buf = nullptr;
  uint32_t* sink = nullptr;
  BENCH_CUDA(cudaMalloc(&buf, buf_bytes));
  BENCH_CUDA(cudaMalloc(&sink, 1 << 20));
  BENCH_CUDA(cudaMemsetAsync(buf, 1, buf_bytes, stream));

  // The ceiling: a device-to-device copy of 1 GiB, bytes read plus bytes written (DESIGN.md's decode ceiling).
  double copy_gbps = 0;
  {
    const size_t bytes = size_t{1} << 30;
    cudaEvent_t a, b;
    BENCH_CUDA(cudaEventCreate(&a));
    BENCH_CUDA(cudaEventCreate(&b));
    std::vector<double> ms_runs;
    for (int i = 0; i < 7; ++i) {
      BENCH_CUDA(cudaEventRecord(a, stream));
      BENCH_CUDA(cudaMemcpyAsync(buf + bytes, buf, bytes, cudaMemcpyDeviceToDevice, stream));
      BENCH_CUDA(cudaEventRecord(b, stream));
      BENCH_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
      ms_runs.push_back(ms);
    }
    std::sort(ms_runs.begin(), ms_runs.end());
    copy_gbps = 2.0 * bytes / (ms_runs[3] * 1e-3) / 1e9;
  }
  const double ideal_us = step_bytes / (copy_gbps * 1e3);
  std::printf("device: %s, %d SMs; copy bandwidth (1 GiB, read + write) %.0f GB/s  <- ceiling\n", prop.name, sms,
              copy_gbps);
  std::printf("decode step of pure streaming kernels: %zu kernels, %.3f GB; at the copy bandwidth %.1f us "
              "(%.1f tok/s)\n\n",
              step.size(), step_bytes / 1e9, ideal_us, 1e6 / ideal_us);

  std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"copy_gbps\": " + std::to_string(copy_gbps) +
                     ", \"step_bytes\": " + std::to_string(step_bytes) + ", \"kernels\": " +
                     std::to_string(step.size()) + ", \"ideal_us\": " + std::to_string(ideal_us) + ", \"step\": [";

  // One kernel reading the whole step's bytes: the read bandwidth with no boundaries at all.
  {
    const Variant v{4, 8, kPdlOff, 0};
    const double us = time_chain_us(stream, {{"all", step_bytes, 0}}, v, sms, buf, sink, replays);
    std::printf("one kernel reading all of it: %.1f us, %.0f GB/s (%.3f of copy)\n\n", us, step_bytes / (us * 1e3),
                ideal_us / us);
    json += "{\"variant\": \"one kernel\", \"us\": " + std::to_string(us) + ", \"ratio\": " +
            std::to_string(ideal_us / us) + "}";
  }

  const char* pdl_names[] = {"off", "strict", "early"};
  std::printf("%-6s %-6s %-7s %-8s %-6s | %9s %8s %7s\n", "bl/SM", "loads", "pdl", "smem KB", "x KB", "us/step",
              "tok/s", "ratio");
  for (int stage : {0, 16 << 10})
  for (size_t smem : {size_t{0}, size_t{100} << 10})
    for (int bps : {1, 2, 4})
      for (int loads : {4, 8, 16})
        for (int pdl : {kPdlOff, kPdlStrict, kPdlEarly}) {
          const size_t block_smem = smem == 0 ? 0 : (size_t{220} << 10) / bps - (size_t{2} << 10);
          if (stage > 0 && (loads == 4 || bps == 1)) continue;
          const Variant v{bps, loads, pdl, block_smem, stage};
          const double us = time_chain_us(stream, step, v, sms, buf, sink, replays);
          std::printf("%-6d %-6d %-7s %-8zu %-6d | %9.1f %8.1f %7.3f\n", bps, loads, pdl_names[pdl], block_smem >> 10,
                      stage >> 10, us, 1e6 / us, ideal_us / us);
          json += ", {\"blocks_per_sm\": " + std::to_string(bps) + ", \"loads\": " + std::to_string(loads) +
                  ", \"pdl\": \"" + pdl_names[pdl] + "\", \"smem\": " + std::to_string(block_smem) +
                  ", \"x_bytes\": " + std::to_string(stage) +
                  ", \"us\": " + std::to_string(us) + ", \"ratio\": " + std::to_string(ideal_us / us) + "}";
        }
  json += "], \"alone\": [";

  // Each op size alone: 36 kernels of one size back to back (distinct regions), per kernel.
  std::printf("\none size alone (36 kernels, 16 loads, full-SM shared memory): us per kernel, ratio\n");
  bool first = true;
  for (const Op& op : {step[0], step[2], step[4], step[5], step[6]})
    for (int bps : {2, 4})
    for (int pdl : {kPdlOff, kPdlEarly}) {
      const std::vector<Op> chain(36, op);
      const Variant v{bps, 16, pdl, (size_t{220} << 10) / bps - (size_t{2} << 10)};
      const double us = time_chain_us(stream, chain, v, sms, buf, sink, replays) / 36;
      const double ideal = op.bytes / (copy_gbps * 1e3);
      std::printf("%-10s %7.1f MB %d bl/SM pdl %-6s %7.2f us  ideal %6.2f  ratio %.3f\n", op.name, op.bytes / 1e6,
                  bps, pdl_names[pdl], us, ideal, ideal / us);
      json += std::string(first ? "" : ", ") + "{\"op\": \"" + op.name + "\", \"bytes\": " + std::to_string(op.bytes) +
              ", \"blocks_per_sm\": " + std::to_string(bps) + ", \"pdl\": \"" + pdl_names[pdl] +
              "\", \"us\": " + std::to_string(us) + ", \"ratio\": " + std::to_string(ideal / us) + "}";
      first = false;
    }
  json += "]}\n";
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
  BENCH_CUDA(cudaFree(buf));
  BENCH_CUDA(cudaFree(sink));
  return 0;
}
