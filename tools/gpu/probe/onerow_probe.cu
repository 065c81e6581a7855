// tools/gpu/probe/onerow_probe.cu — a diagnostic, not part of the engine: where the one-row decode matmul
// (src/backend/cuda/matmul.cu, matmul_mma_kernel<1, S>) loses to a plain stream of the same bytes. A replica
// of its stream — per-warp rings of S stages (16 weight rows × 64 k, 2 KB, and x's two split rows, 256 bytes),
// cp.async without an L2 policy (as the engine's kernel: Context::mma_evict_first is off), the first S - 1
// weight stages before the programmatic-dependent-launch wait, ldmatrix + m16n8k16 MMAs, the warps' sums
// added at each item's end and stored by warp 0 — with parts taken away or changed one at a time:
//   no_mma    the stages land and are released unread (the stream alone)
//   no_x      no x rows in the stages (the B fragment reads whatever the slot holds)
//   hint      the weights under the evict_first policy (cp.async's L2::cache_hint form); --once only: on the
//             H100 of the twenty-eighth session it stops with "an illegal instruction was encountered" at that
//             cp.async (compute-sanitizer: cp16's hinted form), as the engine's hinted weights did
//             (Context::mma_evict_first)
//   tiled     the weights stored so that each warp stage is one contiguous 2 KB (item, step, row, k)
//   wide      warp stages of 128 k (256 contiguous bytes of each row, 1 KB a block round) instead of 64
// and a plain grid-stride stream of 16-byte loads as the reference. Each figure: 36 launches in a row, each on
// its own copy of the weights (together more than 4× the L2), with PDL, captured as a graph and replayed; µs a
// launch and the weight bytes per second against the device-to-device copy bandwidth (read + write, the figure
// the decode ceiling uses). Built and run on the GPU machine:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I src -o onerow_probe tools/gpu/probe/onerow_probe.cu
// (the engine's ldmatrix / MMA wrappers from src/backend/cuda/mma.cuh; the rest is standalone).
//   ./onerow_probe [json path]   (or --once: one plain launch of each 6-stage ring variant, for compute-sanitizer)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/mma.cuh"

#define CK(e)                                                                            \
  do {                                                                                   \
    cudaError_t r_ = (e);                                                                \
    if (r_ != cudaSuccess) {                                                             \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(r_));             \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

constexpr int kWarps = 4, kStepK = 64, kFeatures = 16, kWBytes = kFeatures * kStepK * 2, kXBytes = 2 * kStepK * 2;
constexpr int kStage = kWBytes + kXBytes;
enum Mode : int { kNoMma = 1, kNoX = 2, kHint = 4, kTiled = 8, kWide = 16 };
// kWide: a warp stage of 16 rows × 128 k (two 2 KB sub-tiles, 256 contiguous bytes of each row; a block's
// round 1 KB of each row) instead of 64 k.
template <int M>
__host__ __device__ constexpr int step_k() { return (M & kWide) != 0 ? 2 * kStepK : kStepK; }
template <int M>
__host__ __device__ constexpr int stage_bytes() { return (M & kWide) != 0 ? 2 * kStage : kStage; }

struct Params {
  const __nv_bfloat16* w;
  const __nv_bfloat16* x_split;  // (2, k)
  float* y;
  int n, k;
};

using helium::cuda::ldmatrix_x4;
using helium::cuda::mma_bf16_16x8x16;
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return helium::cuda::shared_address(p); }
__device__ __forceinline__ int swz(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }
__device__ __forceinline__ void cp16(void* s, const void* g, bool hint, uint64_t pol) {
  if (hint)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, 16, %2;" ::"r"(smem_addr(s)), "l"(g), "l"(pol)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 16;" ::"r"(smem_addr(s)), "l"(g) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x2(uint32_t& a, uint32_t& b, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "r"(smem_addr(p)));
}
template <int S, int M>
__global__ void __launch_bounds__(kWarps * 32) onerow_kernel(const Params p) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x & 31, kw = threadIdx.x >> 5;
  constexpr int SK = step_k<M>(), SB = stage_bytes<M>(), SUB = SK / kStepK;
  uint8_t* ring = smem + kw * S * SB;
  float* red = reinterpret_cast<float*>(smem + kWarps * S * SB);
  const int ksteps = p.k / SK;
  const int steps = (ksteps + kWarps - 1) / kWarps;
  const int items = p.n / kFeatures;
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  constexpr bool hint = (M & kHint) != 0;
  struct Cursor {
    int item, step;
  };
  auto advance = [&](Cursor& c) {
    if (++c.step == steps) c = Cursor{c.item + static_cast<int>(gridDim.x), 0};
  };
  auto issue_w = [&](const Cursor& c, int slot) {
    if (c.item >= items) return;
    uint8_t* st = ring + slot * SB;
    const int ks = c.step * kWarps + kw;
#pragma unroll
    for (int j = 0; j < SUB * kWBytes / 16 / 32; ++j) {
      const int piece = j * 32 + lane, r = (piece >> 3) & 15, ch = piece & 7, sub = piece >> 7;
      const __nv_bfloat16* src;
      if constexpr ((M & kTiled) != 0)
        src = p.w + ((int64_t{c.item} * ksteps + ks) * kFeatures * SUB + sub * kFeatures + r) * kStepK + ch * 8;
      else
        src = p.w + (int64_t{c.item} * kFeatures + r) * p.k + ks * SK + sub * kStepK + ch * 8;
      cp16(st + sub * kWBytes + swz(r, ch), src, hint, pol);
    }
  };
  auto issue_x = [&](const Cursor& c, int slot) {
    if constexpr ((M & kNoX) != 0) return;
    if (c.item >= items) return;
    uint8_t* xs = ring + slot * SB + SUB * kWBytes;
    const int ks = c.step * kWarps + kw;
    if (lane < 16 * SUB) {
      const int r = (lane >> 3) & 1, ch = lane & 7, sub = lane >> 4;
      cp16(xs + sub * 256 + swz(r, ch), p.x_split + int64_t{r} * p.k + ks * SK + sub * kStepK + ch * 8, false, pol);
    }
  };
  Cursor issue{static_cast<int>(blockIdx.x), 0}, work = issue;
  {
    Cursor c = issue;
    for (int u = 0; u < S - 1; ++u, advance(c)) {
      issue_w(c, u);
      commit();
    }
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int u = 0; u < S - 1; ++u, advance(issue)) {
    issue_x(issue, u);
    commit();
  }
  float acc[4] = {0, 0, 0, 0};
  int issue_slot = S - 1, work_slot = 0;
  while (work.item < items) {
    issue_w(issue, issue_slot);
    issue_x(issue, issue_slot);
    commit();
    advance(issue);
    issue_slot = issue_slot + 1 == S ? 0 : issue_slot + 1;
    wait_group<S - 1>();
    __syncwarp();
    const uint8_t* st = ring + work_slot * SB;
    if constexpr ((M & kNoMma) == 0) {
#pragma unroll
      for (int sub = 0; sub < SUB; ++sub)
#pragma unroll
        for (int kk = 0; kk < kStepK / 16; ++kk) {
          uint32_t a[4], b0, b1;
          ldmatrix_x4(a, st + sub * kWBytes + swz((lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)));
          ldsm_x2(b0, b1, st + SUB * kWBytes + sub * 256 + swz(lane & 1, 2 * kk + ((lane >> 3) & 1)));
          mma_bf16_16x8x16(acc, a, b0, b1);
        }
    }
    __syncwarp();
    work_slot = work_slot + 1 == S ? 0 : work_slot + 1;
    if (work.step != steps - 1) {
      advance(work);
      continue;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (kw > 0) red[((kw - 1) * 4 + e) * 32 + lane] = acc[e];
    __syncthreads();
    if (kw == 0) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        for (int q = 1; q < kWarps; ++q) acc[e] = __fadd_rn(acc[e], red[((q - 1) * 4 + e) * 32 + lane]);
      if ((lane & 3) == 0) {
        const int f = work.item * kFeatures + (lane >> 2);
        p.y[f] = __fadd_rn(acc[0], acc[1]);
        p.y[f + 8] = __fadd_rn(acc[2], acc[3]);
      }
    }
    __syncthreads();
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    advance(work);
  }
  wait_group<0>();
}

// The reference: every block reads its grid-stride share with 16-byte streaming loads, U in flight a thread,
// the first batch before the wait.
template <int U>
__global__ void __launch_bounds__(256) stream_kernel(const uint4* __restrict__ src, int64_t n16, uint32_t* sink) {
  extern __shared__ uint32_t reserve[];
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  uint32_t acc = 0;
  bool waited = false;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n16; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = i + u * stride;
      v[u] = j < n16 ? __ldcs(src + j) : make_uint4(0, 0, 0, 0);
    }
    if (!waited) {
      asm volatile("griddepcontrol.wait;" ::: "memory");
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (!waited) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc + reserve[threadIdx.x];
}

__global__ void fill(uint32_t* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t z = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    z ^= z >> 15;
    z *= 2246822519u;
    // two BF16 in [-1, 1): sign, a small exponent, random mantissa
    const uint32_t lo = 0x3c00u | (z & 0x807fu), hi = 0x3c00u | ((z >> 16) & 0x807fu);
    p[i] = lo | (hi << 16);
  }
}

int g_sms = 0;
size_t g_optin = 0;

template <class K>
void launch_pdl(cudaStream_t s, K kernel, int grid, int threads, size_t smem, auto... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

// Times `launches` back-to-back launches (fn(s, i)) captured in a graph: µs a launch, median of 7 replays.
template <class F>
double time_graph(int launches, F fn) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < launches; ++i) fn(s, i);
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int w = 0; w < 3; ++w) CK(cudaGraphLaunch(ge, s));
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / launches);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaStreamDestroy(s));
  return t[3];
}

double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int r = 0; r < 9; ++r) {
    CK(cudaEventRecord(e0));
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);
  }
  std::sort(t.begin(), t.end());
  CK(cudaFree(a));
  CK(cudaFree(b));
  return t[4];
}

struct Shape {
  const char* name;
  int n, k;
};

// A block's shared memory for onerow_kernel<S, M>: the warps' rings, then the three warps' sums for warp 0.
template <int S, int M>
constexpr size_t onerow_smem() {
  return size_t{kWarps} * S * stage_bytes<M>() + 3 * 4 * 32 * 4;
}

template <int S, int M>
double time_onerow(const Shape& sh, const std::vector<__nv_bfloat16*>& w, const __nv_bfloat16* xs, float* y,
                   int per_sm) {
  auto kernel = onerow_kernel<S, M>;
  const size_t need = onerow_smem<S, M>();
  // pad so that at most per_sm blocks fit (1 KB reserved a block)
  const size_t per_sm_bytes = 233472;
  size_t smem = need;
  while ((per_sm_bytes / (smem + 1024)) > static_cast<size_t>(per_sm)) smem += 16;
  if (smem > g_optin) return -1.0;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  int fit = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, kWarps * 32, smem));
  const int items = sh.n / kFeatures;
  const int grid = std::min(items, std::min(fit, per_sm) * g_sms);
  return time_graph(36, [&](cudaStream_t s, int i) {
    Params p{w[i % w.size()], xs, y, sh.n, sh.k};
    launch_pdl(s, kernel, grid, kWarps * 32, smem, p);
  });
}

double time_stream(const Shape& sh, const std::vector<__nv_bfloat16*>& w, uint32_t* sink, int per_sm) {
  auto kernel = stream_kernel<8>;
  const size_t smem = 233472 / per_sm - 1024 - 16;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int64_t n16 = int64_t{sh.n} * sh.k * 2 / 16;
  return time_graph(36, [&](cudaStream_t s, int i) {
    launch_pdl(s, kernel, per_sm * g_sms, 256, smem, reinterpret_cast<const uint4*>(w[i % w.size()]), n16, sink);
  });
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  g_optin = prop.sharedMemPerBlockOptin;
  const Shape shapes[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 24576, 4096}, {"down", 4096, 12288}};
  if (argc > 1 && std::string(argv[1]) == "--once") {
    // One plain launch of each 6-stage ring variant on the qkv shape, no graph (for compute-sanitizer).
    const Shape& sh = shapes[0];
    const size_t bytes = size_t{static_cast<size_t>(sh.n)} * sh.k * 2;
    __nv_bfloat16 *w, *xs;
    float* y;
    CK(cudaMalloc(&w, bytes));
    CK(cudaMalloc(&xs, size_t{2} * sh.k * 2));
    CK(cudaMalloc(&y, size_t{static_cast<size_t>(sh.n)} * 4));
    CK(cudaMemset(w, 0, bytes));
    CK(cudaMemset(xs, 0, size_t{2} * sh.k * 2));
    auto once = [&]<int M>(const char* name) {
      auto kernel = onerow_kernel<6, M>;
      CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(onerow_smem<6, M>())));
      kernel<<<2 * g_sms, kWarps * 32, onerow_smem<6, M>()>>>(Params{w, xs, y, sh.n, sh.k});
      const cudaError_t e = cudaDeviceSynchronize();
      std::printf("%s: %s\n", name, cudaGetErrorString(e));
      return e == cudaSuccess;
    };
    const bool ok = once.operator()<kNoMma | kNoX>("ring6 no_x no_mma") && once.operator()<kNoX>("ring6 no_x") &&
                    once.operator()<kNoMma>("ring6 no_mma") && once.operator()<0>("ring6") &&
                    once.operator()<kHint>("ring6 hint");
    return ok ? 0 : 1;
  }
  const double copy = copy_bandwidth();
  std::printf("device %s, %d SMs, copy %.1f GB/s\n", prop.name, g_sms, copy);
  FILE* js = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  if (js) std::fprintf(js, "{\"copy_gbps\": %.1f, \"rows\": [\n", copy);
  bool first = true;
  __nv_bfloat16* xs;
  float* y;
  uint32_t* sink;
  CK(cudaMalloc(&xs, 2 * 12288 * 2));
  CK(cudaMalloc(&y, 24576 * 4));
  CK(cudaMalloc(&sink, 1 << 20));
  CK(cudaMemset(xs, 0, 2 * 12288 * 2));
  for (const Shape& sh : shapes) {
    const size_t bytes = size_t{static_cast<size_t>(sh.n)} * sh.k * 2;
    const int copies = static_cast<int>(std::max<size_t>(4, (size_t{1600} << 20) / bytes));
    std::vector<__nv_bfloat16*> w(copies);
    for (auto& p : w) {
      CK(cudaMalloc(&p, bytes));
      fill<<<1024, 256>>>(reinterpret_cast<uint32_t*>(p), static_cast<int64_t>(bytes / 4), static_cast<uint32_t>(&p - w.data()));
    }
    CK(cudaDeviceSynchronize());
    auto report = [&](const char* variant, int per_sm, double us) {
      if (us < 0) return;
      const double gbps = bytes / (us * 1e-6) / 1e9;
      std::printf("%-8s %-22s %d/SM  %8.2f us  %7.1f GB/s  %.3f of copy\n", sh.name, variant, per_sm, us, gbps, gbps / copy);
      if (js) {
        std::fprintf(js, "%s{\"shape\": \"%s\", \"variant\": \"%s\", \"per_sm\": %d, \"us\": %.3f, \"of_copy\": %.4f}",
                     first ? "" : ",\n", sh.name, variant, per_sm, us, gbps / copy);
        first = false;
      }
      std::fflush(stdout);  // each row kept if a time limit kills the probe
      if (js) std::fflush(js);
    };
    for (int per_sm : {2, 3}) report("stream", per_sm, time_stream(sh, w, sink, per_sm));
    for (int per_sm : {2, 3}) {
      report("ring6", per_sm, time_onerow<6, 0>(sh, w, xs, y, per_sm));
      report("ring6 no_mma", per_sm, time_onerow<6, kNoMma>(sh, w, xs, y, per_sm));
      report("ring6 no_x", per_sm, time_onerow<6, kNoX>(sh, w, xs, y, per_sm));
      report("ring6 no_x no_mma", per_sm, time_onerow<6, kNoX | kNoMma>(sh, w, xs, y, per_sm));
      report("ring6 tiled", per_sm, time_onerow<6, kTiled>(sh, w, xs, y, per_sm));
      report("ring6 tiled no_x", per_sm, time_onerow<6, kTiled | kNoX>(sh, w, xs, y, per_sm));
      report("ring8", per_sm, time_onerow<8, 0>(sh, w, xs, y, per_sm));
      report("ring8 tiled", per_sm, time_onerow<8, kTiled>(sh, w, xs, y, per_sm));
      report("wide3", per_sm, time_onerow<3, kWide>(sh, w, xs, y, per_sm));
      report("wide4", per_sm, time_onerow<4, kWide>(sh, w, xs, y, per_sm));
      report("wide4 tiled", per_sm, time_onerow<4, kWide | kTiled>(sh, w, xs, y, per_sm));
    }
    report("ring12", 2, time_onerow<12, 0>(sh, w, xs, y, 2));
    report("ring12 tiled", 2, time_onerow<12, kTiled>(sh, w, xs, y, 2));
    report("ring4", 4, time_onerow<4, 0>(sh, w, xs, y, 4));
    report("ring6", 4, time_onerow<6, 0>(sh, w, xs, y, 4));
    for (auto* p : w) CK(cudaFree(p));
  }
  if (js) {
    std::fprintf(js, "\n]}\n");
    std::fclose(js);
  }
  return 0;
}
