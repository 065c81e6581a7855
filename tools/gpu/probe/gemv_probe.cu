// tools/gpu/probe/gemv_probe.cu — a diagnostic, not part of the engine: a simplified replica of the decode
// matmul kernel (src/backend/cuda/matmul.cu: one row, BF16 weights, no fused transform, one output) with
// knobs that take parts away — the arithmetic, the staging of x, the per-item epilogue — and a variant
// that loads the weights into registers instead of the shared-memory ring, each timed as 36 launches in a
// row under programmatic dependent launch on Qwen3-8B's shapes. It found where the real kernel lost to a
// plain stream (docs/benchmarks.md, eighth session). Built and run by hand:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -o gemv_probe tools/gpu/probe/gemv_probe.cu
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#define CK(e) do { cudaError_t r_ = (e); if (r_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(r_)); exit(1);} } while (0)

__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void grid_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ __forceinline__ void cp16(void* smem, const void* g, uint64_t pol) {
  unsigned d = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, 16, %2;" :: "r"(d), "l"(g), "l"(pol) : "memory"); }
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void waitg() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

enum { NO_COMPUTE = 1, NO_STAGE = 2, NO_EPI = 4, REGS = 8 };

struct P { const float* x; const __nv_bfloat16* w; float* y; int n, k, fw, kw, mode; };

__device__ __forceinline__ float bsum(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ void widen(uint4 v, float* o) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { o[2*i] = __uint_as_float(w[i] << 16); o[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); }
}

// The lane's place in a block of p.fw x p.kw warps, and the block's shared memory: x as two planes of
// float4 halves, then 256 floats of k-warp partials, then (ring kernel) the weight ring.
struct Geometry {
  int lane, kw, fw, S, s, nchunks, rounds, items;
  float4* xt;
  float* partial;
};
__device__ __forceinline__ Geometry geometry(const P& p, int ft, float4* smem) {
  Geometry g;
  g.lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  g.S = 32 * p.kw;
  g.kw = warp % p.kw;
  g.fw = warp / p.kw;
  g.s = g.kw * 32 + g.lane;
  g.nchunks = p.k / 8;
  g.rounds = (g.nchunks + g.S - 1) / g.S;
  g.items = p.n / (p.fw * ft);
  g.xt = smem;
  g.partial = reinterpret_cast<float*>(smem + 2 * g.nchunks);
  return g;
}

// An item's end: each feature's slice sums by the butterfly, then across the k-warps, stored by lane f.
template <int FT>
__device__ __forceinline__ void store_item(const P& p, const float (&acc)[FT], float* partial, int lane, int kw, int fw,
                                           int f0) {
  float mine = 0.f;
#pragma unroll
  for (int f = 0; f < FT; ++f) { const float v = bsum(acc[f]); if (lane == f) mine = v; }
  bool store = true;
  if (p.kw > 1) {
    partial[(kw * p.fw + fw) * 32 + lane] = mine;
    __syncthreads();
    store = kw == 0;
    if (store) { mine = partial[fw * 32 + lane]; for (int q = 1; q < p.kw; ++q) mine = __fadd_rn(mine, partial[(q * p.fw + fw) * 32 + lane]); }
    __syncthreads();
  }
  if (store && lane < FT) p.y[f0 + lane] = mine;
}

template <int FT, int RIF>
__global__ void __launch_bounds__(256) ring_kernel(const P p) {
  extern __shared__ float4 smem[];
  const auto [lane, kw, fw, S, s, nchunks, rounds, items, xt, partial] = geometry(p, FT, smem);
  const int padded = (rounds + RIF - 1) / RIF * RIF;
  uint4* ring = reinterpret_cast<uint4*>(partial + 256);
  const uint64_t pol = evict_first_policy();
  auto f0_of = [&](int it) { return ((blockIdx.x + it * gridDim.x) * p.fw + fw) * FT; };
  auto exists = [&](int it) { return blockIdx.x + it * gridDim.x < items; };
  auto issue = [&](int f0, bool valid, int j, int slot) {
    const int c = s + j * S;
    if (c < nchunks && valid)
#pragma unroll
      for (int f = 0; f < FT; ++f) cp16(&ring[(slot * FT + f) * blockDim.x + threadIdx.x], p.w + (size_t)(f0 + f) * p.k + c * 8, pol);
    commit();
  };
  { const int f0 = f0_of(0); const bool v = exists(0);
#pragma unroll
    for (int u = 0; u < RIF; ++u) issue(f0, v, u, u); }
  grid_trigger();
  grid_wait();
  if (!(p.mode & NO_STAGE)) {
    for (int i = threadIdx.x; i < 2 * nchunks; i += blockDim.x) xt[(i & 1) * nchunks + (i >> 1)] = reinterpret_cast<const float4*>(p.x)[i];
    __syncthreads();
  }
  for (int it = 0; exists(it); ++it) {
    const int f0 = f0_of(it), nf0 = f0_of(it + 1); const bool nv = exists(it + 1);
    float acc[FT];
#pragma unroll
    for (int f = 0; f < FT; ++f) acc[f] = 0.f;
    for (int j0 = 0; j0 < padded; j0 += RIF) {
#pragma unroll
      for (int u = 0; u < RIF; ++u) {
        const int j = j0 + u;
        waitg<RIF - 1>();
        uint4 cur[FT];
#pragma unroll
        for (int f = 0; f < FT; ++f) cur[f] = ring[(u * FT + f) * blockDim.x + threadIdx.x];
        const int c = s + j * S;
        if (c < nchunks) {
          if (p.mode & NO_COMPUTE) {
#pragma unroll
            for (int f = 0; f < FT; ++f) acc[f] += __uint_as_float(cur[f].x ^ cur[f].y ^ cur[f].z ^ cur[f].w);
          } else {
            const float4 lo = xt[c], hi = xt[nchunks + c];
            const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int f = 0; f < FT; ++f) { float wv[8]; widen(cur[f], wv);
#pragma unroll
              for (int e = 0; e < 8; ++e) acc[f] = __fmaf_rn(wv[e], xv[e], acc[f]); }
          }
        }
        if (j + RIF < padded) issue(f0, true, j + RIF, u); else issue(nf0, nv, j + RIF - padded, u);
      }
    }
    if (p.mode & NO_EPI) {
      if (lane == 0) for (int f = 0; f < FT; ++f) if (acc[f] == 1.2345f) p.y[f0 + f] = acc[f];
      continue;
    }
    store_item<FT>(p, acc, partial, lane, kw, fw, f0);
  }
  waitg<0>();
}

// Register batches: U rounds x FT features loaded into registers (double buffered), no ring.
template <int FT, int U>
__global__ void __launch_bounds__(256) regs_kernel(const P p) {
  extern __shared__ float4 smem[];
  const auto [lane, kw, fw, S, s, nchunks, rounds, items, xt, partial] = geometry(p, FT, smem);
  const int padded = (rounds + U - 1) / U * U;
  const uint64_t pol = evict_first_policy();
  auto f0_of = [&](int it) { return ((blockIdx.x + it * gridDim.x) * p.fw + fw) * FT; };
  const int bpi = padded / U;
  const int my_items = (items - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
  const int total = my_items * bpi;
  uint4 A[U][FT], B[U][FT];
  auto load_b = [&](uint4 (&b)[U][FT], int bi) {
    const int f0 = f0_of(bi / bpi), j0 = (bi % bpi) * U;
    const bool valid = bi < total;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = s + (j0 + u) * S;
#pragma unroll
      for (int f = 0; f < FT; ++f) {
        if (c < nchunks && valid) {
          const uint4* a = reinterpret_cast<const uint4*>(p.w + (size_t)(f0 + f) * p.k + c * 8);
          asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                       : "=r"(b[u][f].x), "=r"(b[u][f].y), "=r"(b[u][f].z), "=r"(b[u][f].w) : "l"(a), "l"(pol));
        } else b[u][f] = make_uint4(0, 0, 0, 0);
      }
    }
  };
  float acc[FT];
#pragma unroll
  for (int f = 0; f < FT; ++f) acc[f] = 0.f;
  auto consume = [&](const uint4 (&b)[U][FT], int bi) {
    const int j0 = (bi % bpi) * U;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = s + (j0 + u) * S;
      if (c < nchunks) {
        const float4 lo = xt[c], hi = xt[nchunks + c];
        const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int f = 0; f < FT; ++f) { float wv[8]; widen(b[u][f], wv);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[f] = __fmaf_rn(wv[e], xv[e], acc[f]); }
      }
    }
    if ((bi + 1) % bpi != 0) return;
    const int f0 = f0_of(bi / bpi);
    store_item<FT>(p, acc, partial, lane, kw, fw, f0);
#pragma unroll
    for (int f = 0; f < FT; ++f) acc[f] = 0.f;
  };
  load_b(A, 0);
  grid_trigger();
  grid_wait();
  if (!(p.mode & NO_STAGE)) {
    for (int i = threadIdx.x; i < 2 * nchunks; i += blockDim.x) xt[(i & 1) * nchunks + (i >> 1)] = reinterpret_cast<const float4*>(p.x)[i];
    __syncthreads();
  }
  for (int bi = 0; bi < total; bi += 2) {
    load_b(B, bi + 1);
    consume(A, bi);
    load_b(A, bi + 2);
    if (bi + 1 < total) consume(B, bi + 1);
  }
}

// ---------------------------------------------------------------------------------------------------
struct Shape { const char* name; int n, k, fw, kw; };
using K = void (*)(P);

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const Shape shapes[] = {{"o_proj", 4096, 4096, 2, 4}, {"qkv", 6144, 4096, 2, 4}, {"gate_up", 24576, 4096, 2, 4}, {"down", 4096, 12288, 4, 2}};
  size_t maxw = 0; for (auto& s : shapes) maxw = std::max(maxw, (size_t)s.n * s.k * 2);
  const int copies = 36;
  char* w; CK(cudaMalloc(&w, maxw * copies)); CK(cudaMemsetAsync(w, 0x3c, maxw * copies, st));
  float *x, *y; CK(cudaMalloc(&x, 12288 * 4)); CK(cudaMalloc(&y, 32 << 20)); CK(cudaMemsetAsync(x, 0, 12288 * 4, st));
  struct Var { const char* name; K k; int ring_bytes_per_thread; int mode; };
  const Var vars[] = {
    {"ring 4x4", ring_kernel<4, 4>, 256, 0},
    {"ring 4x4 no compute", ring_kernel<4, 4>, 256, NO_COMPUTE},
    {"ring 4x4 no stage", ring_kernel<4, 4>, 256, NO_STAGE},
    {"ring 4x4 no epilogue", ring_kernel<4, 4>, 256, NO_EPI},
    {"ring 4x4 none", ring_kernel<4, 4>, 256, NO_COMPUTE | NO_STAGE | NO_EPI},
    {"ring 4x8", ring_kernel<4, 8>, 512, 0},
    {"ring 2x8", ring_kernel<2, 8>, 256, 0},
    {"ring 2x16", ring_kernel<2, 16>, 512, 0},
    {"regs 4x2", regs_kernel<4, 2>, 0, 0},
    {"regs 4x4", regs_kernel<4, 4>, 0, 0},
    {"regs 2x4", regs_kernel<2, 4>, 0, 0},
    {"regs 2x8", regs_kernel<2, 8>, 0, 0},
    {"regs 1x8", regs_kernel<1, 8>, 0, 0},
  };
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (const Shape& sh : shapes) {
    const size_t wb = (size_t)sh.n * sh.k * 2;
    printf("%s %d x %d (%.1f MB), warps %d x %d k: ideal at 4650 GB/s read %.2f us\n", sh.name, sh.n, sh.k, wb / 1e6, sh.fw, sh.kw, wb / 4650e3);
    for (const Var& v : vars) {
      const int ft = (v.name[5] == ' ' ? v.name[6] : v.name[5]) - '0';
      (void)ft;
      for (int fw_mul : {1, 2}) {
        P p{x, nullptr, y, sh.n, sh.k, sh.fw * fw_mul, sh.kw, v.mode};
        if (p.fw * p.kw > 8) continue;
        const size_t smem = (size_t)sh.k * 4 + 256 * 4 + (size_t)v.ring_bytes_per_thread * 32 * p.fw * p.kw;
        CK(cudaFuncSetAttribute(v.k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop.sharedMemPerBlockOptin));
        int per_sm = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.k, 32 * p.fw * p.kw, smem));
        cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, v.k));
        const int grid = per_sm * sms;
        cudaGraph_t g; CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < copies; ++i) {
          p.w = reinterpret_cast<const __nv_bfloat16*>(w + i * wb);
          cudaLaunchConfig_t c{}; c.gridDim = grid; c.blockDim = 32 * p.fw * p.kw; c.dynamicSmemBytes = smem; c.stream = st;
          cudaLaunchAttribute at{}; at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
          c.attrs = &at; c.numAttrs = 1;
          CK(cudaLaunchKernelEx(&c, v.k, p));
        }
        CK(cudaStreamEndCapture(st, &g));
        cudaGraphExec_t ge; CK(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, st));
        std::vector<float> t;
        for (int r = 0; r < 15; ++r) { CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms); }
        std::sort(t.begin(), t.end());
        const double us = t[t.size() / 2] * 1e3 / copies;
        printf("  %-22s fw %d: %2d blocks/SM, %3d regs: %7.2f us  %5.0f GB/s\n", v.name, p.fw, per_sm, fa.numRegs, us, wb / (us * 1e3));
        CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
      }
    }
  }
  return 0;
}
