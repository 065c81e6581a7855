// tools/gpu/probe/handoff_probe.cu — a diagnostic, not part of the engine: what one kernel boundary of the
// decode step's attention chain (q/k prologue → partitions → merge → o_proj, ~11 µs a layer for ~1 µs of K/V
// bytes on both the H100 and the H200; docs/benchmarks.md, thirty-third session) costs by itself, and how much of
// it a handoff through flags in global memory would save against the engine's programmatic dependent launch.
//
// A chain of kStages small dependent kernels, each block reading 64 floats that a block of the previous kernel
// wrote (one L2 round trip), adding one and writing its own 64; captured as a graph and replayed:
//   stream    plain launches: a kernel starts once the previous one has ended
//   pdl       programmatic dependent launch, the trigger at each block's start and griddepcontrol.wait before the
//             read (the engine's form: cuda_ops.cuh, launch / pdl_wait)
//   flag_all  the same launch, no griddepcontrol.wait: thread 0 of each block spins (ld.acquire.gpu) on the
//             previous kernel's counter until every one of its blocks has published (its writes, __syncthreads,
//             __threadfence, atomicAdd)
//   flag_one  each block waits only for the one block whose output it reads (a flag per block)
// The flag forms are safe from deadlock because a dependent grid launches only once every block of the grid
// before it has started (each triggers at its start), so the blocks it waits for are resident. Each replay
// starts from a new value (an epoch kernel first), so a read of the previous replay's data is caught: after the
// replays every output must be epoch + kStages.
// Grids: the prologue's (40 blocks of 32 threads a row), the partition kernel's at 1K (128 of 128), the merge's
// (32 of 256) and a full wave (264 of 128). µs a boundary = a replay's time / kStages.
// Built and run on the GPU machine:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -o handoff_probe tools/gpu/probe/handoff_probe.cu
//   ./handoff_probe [json path]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(expr)                                                                          \
  do {                                                                                       \
    cudaError_t r_ = (expr);                                                                 \
    if (r_ != cudaSuccess) {                                                                 \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(r_));      \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

namespace {

constexpr int kStages = 144;  // 36 layers × four boundaries
constexpr int kFloats = 64;   // what each block reads and writes
enum Mode { kStream, kPdl, kFlagAll, kFlagOne };
const char* const kModeNames[] = {"stream", "pdl", "flag_all", "flag_one"};

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__global__ void epoch_kernel(float* epoch) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *epoch += 1.0f;
}

// Stage `stage` of the chain: block b reads the 64 floats block src(b) of the previous stage wrote (stage 0:
// the epoch), adds one and writes them. counters[stage] counts the blocks that have published (flag_all);
// flags[stage · blocks + b] is block b's (flag_one); both zeroed before each replay.
template <Mode kMode>
__global__ void stage_kernel(const float* epoch, const float* in, float* out, int* counters, int* flags, int stage,
                             int blocks) {
  if (kMode != kStream) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int b = blockIdx.x, src = (b * 7 + 3) % blocks;  // another block's output: the handoff crosses SMs
  if (kMode == kPdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (kMode == kFlagAll && stage > 0) {
    if (threadIdx.x == 0)
      while (load_acquire(&counters[stage - 1]) < blocks) {
      }
    __syncthreads();
  }
  if (kMode == kFlagOne && stage > 0) {
    if (threadIdx.x == 0)
      while (load_acquire(&flags[(stage - 1) * blocks + src]) == 0) {
      }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < kFloats; i += blockDim.x) {
    const float v = stage == 0 ? *epoch : in[src * kFloats + i];
    out[b * kFloats + i] = v + 1.0f;
  }
  if (kMode == kFlagAll || kMode == kFlagOne) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (kMode == kFlagAll) atomicAdd(&counters[stage], 1);
      else atomicExch(&flags[stage * blocks + b], 1);
    }
  }
}

template <Mode kMode>
void launch_stage(cudaStream_t s, int blocks, int threads, const float* epoch, const float* in, float* out,
                  int* counters, int* flags, int stage) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  if (kMode != kStream && stage > 0) {  // stage 0 follows the memsets and the epoch kernel
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  CHECK(cudaLaunchKernelEx(&cfg, stage_kernel<kMode>, epoch, in, out, counters, flags, stage, blocks));
}

struct Result {
  double us_per_boundary;
  bool correct;
};

template <Mode kMode>
Result measure(int blocks, int threads) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *epoch, *bufs;
  int *counters, *flags;
  CHECK(cudaMalloc(&epoch, sizeof(float)));
  CHECK(cudaMemset(epoch, 0, sizeof(float)));
  // A buffer per stage (no stage overwrites what a running one may still read: flag_one bounds one producer only).
  CHECK(cudaMalloc(&bufs, sizeof(float) * kStages * blocks * kFloats));
  CHECK(cudaMalloc(&counters, sizeof(int) * kStages));
  CHECK(cudaMalloc(&flags, sizeof(int) * kStages * blocks));
  auto buf = [&](int stage) { return bufs + static_cast<size_t>(stage) * blocks * kFloats; };
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CHECK(cudaMemsetAsync(counters, 0, sizeof(int) * kStages, s));
  CHECK(cudaMemsetAsync(flags, 0, sizeof(int) * kStages * blocks, s));
  epoch_kernel<<<1, 32, 0, s>>>(epoch);
  for (int st = 0; st < kStages; ++st)
    launch_stage<kMode>(s, blocks, threads, epoch, st > 0 ? buf(st - 1) : nullptr, buf(st), counters, flags, st);
  CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 5; ++i) CHECK(cudaGraphLaunch(exec, s));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  constexpr int kReplays = 50;
  CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < kReplays; ++i) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  // Every value the last stage wrote must be the last epoch + kStages.
  std::vector<float> got(static_cast<size_t>(blocks) * kFloats);
  float last_epoch = 0;
  CHECK(cudaMemcpy(got.data(), buf(kStages - 1), sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&last_epoch, epoch, sizeof(float), cudaMemcpyDeviceToHost));
  bool correct = true;
  for (float v : got) correct &= v == last_epoch + kStages;
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(epoch));
  CHECK(cudaFree(bufs));
  CHECK(cudaFree(counters));
  CHECK(cudaFree(flags));
  CHECK(cudaStreamDestroy(s));
  return {ms * 1000.0 / (kReplays * kStages), correct};
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d multiprocessors\n", prop.name, prop.multiProcessorCount);
  struct Grid {
    const char* name;
    int blocks, threads;
  };
  const Grid grids[] = {{"prologue 40x32", 40, 32}, {"partitions 128x128", 128, 128}, {"merge 32x256", 32, 256},
                        {"wave 264x128", 264, 128}};
  std::string json = "[";
  for (const Grid& g : grids) {
    const Result r[] = {measure<kStream>(g.blocks, g.threads), measure<kPdl>(g.blocks, g.threads),
                        measure<kFlagAll>(g.blocks, g.threads), measure<kFlagOne>(g.blocks, g.threads)};
    std::printf("%-20s", g.name);
    for (int m = 0; m < 4; ++m) {
      std::printf("  %s %.2f us%s", kModeNames[m], r[m].us_per_boundary, r[m].correct ? "" : " (WRONG RESULT)");
      json += std::string(json.size() > 1 ? "," : "") + "{\"grid\":\"" + g.name + "\",\"mode\":\"" + kModeNames[m] +
              "\",\"us_per_boundary\":" + std::to_string(r[m].us_per_boundary) +
              ",\"correct\":" + (r[m].correct ? "true" : "false") + "}";
    }
    std::printf("\n");
  }
  json += "]\n";
  if (argc > 1) {
    if (FILE* f = std::fopen(argv[1], "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return 0;
}
