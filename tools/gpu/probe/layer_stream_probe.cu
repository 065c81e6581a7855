// tools/gpu/probe/layer_stream_probe.cu — a diagnostic: does a persistent decode kernel whose weight stream
// runs on through the boundaries between a layer's matmuls keep the memory busy where the engine's
// kernel-per-op step does not? (The engine's 1K decode step sits at ~0.80 of the bandwidth ceiling, and with
// attention left out at ~0.87: each matmul boundary leaves the memory idle for a few microseconds while the
// next kernel's blocks become resident, wait for the previous grid and stage x; docs/benchmarks.md, fifth,
// eighth and ninth sessions. The seventh session's chained matmuls, whose blocks issued the next stage's
// rounds only up to a grid barrier, were slower.)
//
// The kernel: one block per multiprocessor, warp-specialised. A producer lane streams the block's share of
// every weight of the 36 layers — for each matmul the contiguous rows [N·b/G, N·(b+1)/G) of the row-major
// BF16 weight — through a ring of 24 KB stages (whole rows: 3 of K = 4096, 1 of K = 12288) with
// cp.async.bulk (the tensor memory accelerator) on mbarriers, never waiting for anything but a free stage:
// weights do not depend on the activations, so it runs ahead across every boundary as far as the ring
// reaches. CONSUMER_WARPS (8 or 16) consumer warps take the stages in order; warp w owns a fixed k-range of
// every row, so x for its columns stays in registers for a whole matmul. Before each matmul they wait for
// the previous one's grid-wide completion (a counter per matmul, release / acquire), load x (F32; for down,
// SiLU(gate)·up of gate_up's output; a layer's input plus x0, a residual), optionally spin `attention_us`
// before o_proj (standing in for decode attention's latency), and release stages as they read them. A layer
// is Qwen3-8B's: q/k/v (6144 × 4096), o (4096 × 4096), gate/up (24576 × 4096), down (4096 × 12288); o_proj
// reads q's part of the q/k/v output as its x. No norms or RoPE.
//
// Variants: the producer's copies per stage (tma1 / tma4), the ring's depth, no L2 hint, the producer warp's
// cp.async instead of the bulk copies, `fence` (the producer starts a matmul's weights only after the
// previous matmul's completion: the kernel-per-op step's order without its launch costs), `noconsume` (the
// consumers release stages unread: the stream alone). Prints µs per layer and the weight bytes moved per
// second beside the device-to-device copy bandwidth (2 × bytes ÷ time of a 1 GiB copy, the engine's figure),
// and the largest relative difference of the last layer's output from a plain one-warp-per-row kernel chain
// (docs/benchmarks.md, sixteenth session). Built and run by hand on the GPU machine:
//   nvcc -O3 -std=c++20 -DCONSUMER_WARPS=16 -gencode=arch=compute_90a,code=sm_90a -o layer_stream_probe tools/gpu/probe/layer_stream_probe.cu
//   ./layer_stream_probe
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(e)                                                                \
  do {                                                                       \
    cudaError_t r_ = (e);                                                    \
    if (r_ != cudaSuccess) {                                                 \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(r_)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

constexpr int kLayers = 36, kOpsPerLayer = 4, kOps = kLayers * kOpsPerLayer;
constexpr int kHidden = 4096, kInter = 12288;
// Output rows and inputs of a layer's matmuls: q/k/v, o, gate/up, down.
__host__ __device__ constexpr int op_n(int kind) { return kind == 0 ? 6144 : kind == 2 ? 2 * kInter : kHidden; }
__host__ __device__ constexpr int op_k(int kind) { return kind == 3 ? kInter : kHidden; }
#ifndef CONSUMER_WARPS
#define CONSUMER_WARPS 8
#endif
constexpr int kConsumerWarps = CONSUMER_WARPS, kThreads = 32 * (kConsumerWarps + 1);
constexpr int kStageBytes = 24576;
constexpr int kMaxRows = 192;     // rows of one matmul per block (24576 / 132 = 186.2)

// What a variant sets.
struct Settings {
  int fence;  // 1: the producer waits for the previous matmul's completion
  int stages;
  int attention_ns;
  int evict_first;
  int loader;   // 0: cp.async.bulk by one lane, `pieces` copies a stage; 1: the producer warp's cp.async
  int pieces;
  int consume;  // 0: the consumers release each stage unread (the producer's rate alone)
};

struct Params : Settings {
  const __nv_bfloat16* w[kOps];
  float* y[kOps];
  const float* x0;
  int* done;  // per matmul: blocks finished
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n LAB_WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra LAB_WAIT_%=;\n}\n" ::"r"(smem_u32(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, bool hint,
                                          uint64_t policy) {
  if (hint)
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            smem_u32(dst)),
        "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
        : "memory");
  else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumerWarps * 32) : "memory"); }
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void slice_of(int op, int b, int g, int& r0, int& r1) {
  const int n = op_n(op % kOpsPerLayer);
  r0 = static_cast<int>(int64_t{n} * b / g);
  r1 = static_cast<int>(int64_t{n} * (b + 1) / g);
}

// x modes: plain, plus x0 (the layer's input: a residual, so that values keep their size over 36 layers),
// or SiLU(gate) * up of gate_up's output.
enum StageMode { kPlain, kResidual, kSwiglu };

// Rows of a matmul in one ring stage (whole rows: 3 of K = 4096, 1 of K = 12288).
__host__ __device__ constexpr int rows_per_stage(int k) { return kStageBytes / (2 * k); }

// One matmul's share of a block. Warp w owns the k-range [w·K/W, (w+1)·K/W) of every row; lane l the
// 16-byte pieces w·K/W·2 + j·512 + l·16 of it (j < kPieces), contiguous across the warp, so x for those
// columns sits in the lane's registers for the whole matmul. Per row: the lane's products in piece order,
// a butterfly over the warp, the warps' sums added in warp order at the end.
template <int K, int kMode>
__device__ __forceinline__ void consume_op(const Params& p, int op, uint8_t* ring, uint64_t* full, uint64_t* empty,
                                           float* partial, int& s, uint32_t& phase) {
  constexpr int kPieces = K * 2 / kConsumerWarps / 512;
  static_assert(kPieces * 512 * kConsumerWarps == K * 2, "k must split into whole pieces per lane");
  constexpr int kRows = rows_per_stage(K);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
  const int b = blockIdx.x, g = gridDim.x;
  if (op > 0) {
    if (tid == 0)
      while (ld_acquire(&p.done[op - 1]) < g) {
      }
    consumer_sync();
  }
  if (op % kOpsPerLayer == 1 && p.attention_ns > 0 && tid == 0) {
    const uint64_t t0 = now_ns();
    while (now_ns() - t0 < static_cast<uint64_t>(p.attention_ns)) {
    }
  }
  if (op % kOpsPerLayer == 1) consumer_sync();
  const float* src = op == 0 ? p.x0 : p.y[op - 1];
  float4 x[2 * kPieces];
  {
    float4 u[2 * kPieces];
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      const int col = warp * (K / kConsumerWarps) + j * 256 + lane * 8;
      x[2 * j] = __ldcg(reinterpret_cast<const float4*>(src + col));
      x[2 * j + 1] = __ldcg(reinterpret_cast<const float4*>(src + col + 4));
      if (kMode == kSwiglu) {
        u[2 * j] = __ldcg(reinterpret_cast<const float4*>(src + kInter + col));
        u[2 * j + 1] = __ldcg(reinterpret_cast<const float4*>(src + kInter + col + 4));
      }
      if (kMode == kResidual) {
        u[2 * j] = __ldcg(reinterpret_cast<const float4*>(p.x0 + col));
        u[2 * j + 1] = __ldcg(reinterpret_cast<const float4*>(p.x0 + col + 4));
      }
    }
#pragma unroll
    for (int j = 0; j < 2 * kPieces; ++j) {
      if (kMode == kSwiglu) {
        x[j].x = x[j].x / (1.0f + __expf(-x[j].x)) * u[j].x;
        x[j].y = x[j].y / (1.0f + __expf(-x[j].y)) * u[j].y;
        x[j].z = x[j].z / (1.0f + __expf(-x[j].z)) * u[j].z;
        x[j].w = x[j].w / (1.0f + __expf(-x[j].w)) * u[j].w;
      } else if (kMode == kResidual) {
        x[j].x += u[j].x, x[j].y += u[j].y, x[j].z += u[j].z, x[j].w += u[j].w;
      }
    }
  }
  int r0, r1;
  slice_of(op, b, g, r0, r1);
  for (int rs = 0; rs < r1 - r0; rs += kRows) {
    mbar_wait(&full[s], phase);
    const uint8_t* stage = ring + int64_t{s} * kStageBytes;
    float v[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      v[r] = 0.0f;
      if (p.consume && rs + r < r1 - r0) {
#pragma unroll
        for (int j = 0; j < kPieces; ++j) {
          const uint4 wv = *reinterpret_cast<const uint4*>(stage + r * K * 2 + warp * (K * 2 / kConsumerWarps) + j * 512 +
                                                           lane * 16);
          const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv);
          const float2 f0 = __bfloat1622float2(w2[0]), f1 = __bfloat1622float2(w2[1]),
                       f2 = __bfloat1622float2(w2[2]), f3 = __bfloat1622float2(w2[3]);
          v[r] = fmaf(f0.x, x[2 * j].x, v[r]);
          v[r] = fmaf(f0.y, x[2 * j].y, v[r]);
          v[r] = fmaf(f1.x, x[2 * j].z, v[r]);
          v[r] = fmaf(f1.y, x[2 * j].w, v[r]);
          v[r] = fmaf(f2.x, x[2 * j + 1].x, v[r]);
          v[r] = fmaf(f2.y, x[2 * j + 1].y, v[r]);
          v[r] = fmaf(f3.x, x[2 * j + 1].z, v[r]);
          v[r] = fmaf(f3.y, x[2 * j + 1].w, v[r]);
        }
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);  // the stage is in registers now
    if (++s == p.stages) s = 0, phase ^= 1;
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
#pragma unroll
      for (int r = 0; r < kRows; ++r) v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (rs + r < r1 - r0) partial[warp * kMaxRows + rs + r] = v[r];
  }
  consumer_sync();
  for (int r = tid; r < r1 - r0; r += kConsumerWarps * 32) {
    float sum = 0.0f;
    for (int w = 0; w < kConsumerWarps; ++w) sum += partial[w * kMaxRows + r];
    p.y[op][r0 + r] = sum;
  }
  consumer_sync();
  if (tid == 0) {
    __threadfence();
    atomicAdd(&p.done[op], 1);
  }
}

__global__ void __launch_bounds__(kThreads, 1) layer_stream(const Params p) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + p.stages;
  float* partial = reinterpret_cast<float*>(smem + 1024);  // [kConsumerWarps][kMaxRows]
  uint8_t* ring = reinterpret_cast<uint8_t*>(partial + kConsumerWarps * kMaxRows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, b = blockIdx.x, g = gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      mbar_init(&full[s], p.loader == 1 ? 32 : 1);
      mbar_init(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // the producer: each stage holds whole rows of one matmul
    if (p.loader == 0 && lane != 0) return;
    uint64_t policy = 0;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    int s = 0;
    uint32_t phase = 0;
    int64_t issued = 0;
    for (int op = 0; op < kOps; ++op) {
      if (p.fence && op > 0)
        while (ld_acquire(&p.done[op - 1]) < g) {
        }
      int r0, r1;
      slice_of(op, b, g, r0, r1);
      const int k = op_k(op % kOpsPerLayer), rows = rows_per_stage(k);
      const uint8_t* src = reinterpret_cast<const uint8_t*>(p.w[op] + int64_t{r0} * k);
      const int64_t bytes = int64_t{r1 - r0} * k * 2, step = int64_t{rows} * k * 2;
      for (int64_t off = 0; off < bytes; off += step) {
        if (issued >= p.stages) mbar_wait(&empty[s], phase ^ 1);
        const uint32_t n = static_cast<uint32_t>(bytes - off < step ? bytes - off : step);
        uint8_t* dst = ring + int64_t{s} * kStageBytes;
        if (p.loader == 0) {
          mbar_expect_tx(&full[s], n);
          const uint32_t piece = ((n / p.pieces) + 15) / 16 * 16;
          for (uint32_t o = 0; o < n; o += piece)
            bulk_load(dst + o, src + off + o, n - o < piece ? n - o : piece, &full[s], p.evict_first != 0, policy);
        } else {
          for (uint32_t o = lane * 16; o < n; o += 32 * 16) {
            if (p.evict_first)
              asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(smem_u32(dst + o)),
                           "l"(src + off + o), "l"(policy)
                           : "memory");
            else
              asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst + o)), "l"(src + off + o)
                           : "memory");
          }
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(&full[s])) : "memory");
        }
        ++issued;
        if (++s == p.stages) s = 0, phase ^= 1;
      }
    }
    if (p.loader == 1) asm volatile("cp.async.wait_all;" ::: "memory");
    return;
  }

  int s = 0;
  uint32_t phase = 0;
  for (int op = 0; op < kOps; ++op) {
    switch (op % kOpsPerLayer) {
      case 0:
        if (op == 0)
          consume_op<kHidden, kPlain>(p, op, ring, full, empty, partial, s, phase);
        else
          consume_op<kHidden, kResidual>(p, op, ring, full, empty, partial, s, phase);
        break;
      case 1:
      case 2: consume_op<kHidden, kPlain>(p, op, ring, full, empty, partial, s, phase); break;
      default: consume_op<kInter, kSwiglu>(p, op, ring, full, empty, partial, s, phase); break;
    }
  }
}

// The reference: one warp per output row, the same x rules.
__global__ void reference_op(const __nv_bfloat16* w, const float* src, const float* x0, float* y, int n, int k,
                             int kind) {
  const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= n) return;
  double sum = 0.0;
  for (int c = lane; c < k; c += 32) {
    float x = src[c];
    if (x0) x += x0[c];
    if (kind == 3) {
      const float gate = src[c], up = src[kInter + c];
      x = gate / (1.0f + expf(-gate)) * up;
    }
    sum += static_cast<double>(__bfloat162float(w[int64_t{row} * k + c])) * x;
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) y[row] = static_cast<float>(sum);
}

__global__ void fill_weights(__nv_bfloat16* w, int64_t n, float scale, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = __float2bfloat16((static_cast<float>(h & 0xffffff) / 16777216.0f * 2.0f - 1.0f) * scale);
  }
}

int main() {
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  // Copy bandwidth, as the engine measures it.
  double copy_gbs = 0;
  {
    const size_t bytes = size_t{1} << 30;
    void *a, *bb;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&bb, bytes));
    float best = 1e30f;
    for (int i = 0; i < 11; ++i) {
      CK(cudaEventRecord(e0, stream));
      CK(cudaMemcpyAsync(bb, a, bytes, cudaMemcpyDeviceToDevice, stream));
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i > 0) best = std::min(best, ms);
    }
    copy_gbs = 2.0 * bytes / (best * 1e-3) / 1e9;
    CK(cudaFree(a));
    CK(cudaFree(bb));
  }

  Params p{};
  int64_t weight_bytes = 0;
  for (int op = 0; op < kOps; ++op) {
    const int kind = op % kOpsPerLayer;
    const int64_t n = int64_t{op_n(kind)} * op_k(kind);
    __nv_bfloat16* w;
    CK(cudaMalloc(&w, n * 2));
    fill_weights<<<1024, 256, 0, stream>>>(w, n, std::sqrt(3.0f / op_k(kind)), 0x9e3779b9u * (op + 1));
    p.w[op] = w;
    weight_bytes += n * 2;
    CK(cudaMalloc(&p.y[op], sizeof(float) * op_n(kind)));
  }
  std::vector<float> x0(kHidden);
  for (int i = 0; i < kHidden; ++i) x0[i] = std::sin(0.37f * i);
  float* d_x0;
  CK(cudaMalloc(&d_x0, sizeof(float) * kHidden));
  CK(cudaMemcpy(d_x0, x0.data(), sizeof(float) * kHidden, cudaMemcpyHostToDevice));
  p.x0 = d_x0;
  CK(cudaMalloc(&p.done, sizeof(int) * kOps));

  // Reference chain.
  std::vector<float*> ref(kOps);
  for (int op = 0; op < kOps; ++op) {
    const int kind = op % kOpsPerLayer;
    CK(cudaMalloc(&ref[op], sizeof(float) * op_n(kind)));
    const float* src = op == 0 ? d_x0 : ref[op - 1];
    reference_op<<<(op_n(kind) + 3) / 4, 128, 0, stream>>>(p.w[op], src, kind == 0 && op > 0 ? d_x0 : nullptr, ref[op],
                                                            op_n(kind), op_k(kind), kind);
  }
  CK(cudaStreamSynchronize(stream));
  std::vector<float> want(kHidden), got(kHidden);
  CK(cudaMemcpy(want.data(), ref[kOps - 1], sizeof(float) * kHidden, cudaMemcpyDeviceToHost));

  double norm = 0;  // the reference's largest output, the scale of the differences
  for (int i = 0; i < kHidden; ++i) norm = std::max(norm, static_cast<double>(std::fabs(want[i])));

  const size_t fixed = 1024 + sizeof(float) * kConsumerWarps * kMaxRows;
  int max_smem = 0;
  CK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const int max_stages = static_cast<int>((max_smem - fixed) / kStageBytes);
  CK(cudaFuncSetAttribute(layer_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  std::printf("%d SMs, copy %.1f GB/s, weights %.2f GB (%d layers), up to %d stages of %d KB\n", sms, copy_gbs,
              weight_bytes / 1e9, kLayers, max_stages, kStageBytes / 1024);
  std::printf("{\"copy_gbs\": %.1f, \"weight_bytes\": %lld}\n", copy_gbs, static_cast<long long>(weight_bytes));

  struct Variant {
    const char* mode;
    Settings settings;
  };
  const int ms_ = max_stages;
  const std::vector<Variant> variants = {
      {"tma1-noconsume", {0, ms_, 0, 1, 0, 1, 0}}, {"tma1", {0, ms_, 0, 1, 0, 1, 1}},
      {"tma4", {0, ms_, 0, 1, 0, 4, 1}},           {"tma1-nohint", {0, ms_, 0, 0, 0, 1, 1}},
      {"tma1-4stages", {0, 4, 0, 1, 0, 1, 1}},     {"tma1-6stages", {0, 6, 0, 1, 0, 1, 1}},
      {"tma1-fence", {1, ms_, 0, 1, 0, 1, 1}},     {"tma1-att3", {0, ms_, 3000, 1, 0, 1, 1}},
      {"tma1-att5", {0, ms_, 5000, 1, 0, 1, 1}},   {"tma1-fence-att5", {1, ms_, 5000, 1, 0, 1, 1}},
      {"tma1-att10", {0, ms_, 10000, 1, 0, 1, 1}}, {"cpasync", {0, ms_, 0, 1, 1, 1, 1}},
  };
  for (const Variant& v : variants) {
    static_cast<Settings&>(p) = v.settings;
    const size_t smem = fixed + size_t{kStageBytes} * p.stages;
    std::vector<float> ms_runs;
    for (int run = 0; run < 7; ++run) {
      CK(cudaMemsetAsync(p.done, 0, sizeof(int) * kOps, stream));
      CK(cudaEventRecord(e0, stream));
      layer_stream<<<sms, kThreads, smem, stream>>>(p);
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (run > 0) ms_runs.push_back(ms);
    }
    std::sort(ms_runs.begin(), ms_runs.end());
    const double ms = ms_runs[ms_runs.size() / 2];
    CK(cudaMemcpy(got.data(), p.y[kOps - 1], sizeof(float) * kHidden, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int i = 0; i < kHidden; ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]) / norm);
    const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
    const double ideal_us = weight_bytes / (copy_gbs * 1e9) * 1e6 / kLayers;
    const double att_us = p.attention_ns * 1e-3;
    std::printf(
        "{\"mode\": \"%s\", \"stages\": %d, \"attention_us\": %.1f, \"evict_first\": %d, \"us_per_layer\": %.2f, "
        "\"weight_gbs\": %.1f, \"ratio_to_copy\": %.3f, \"ratio_with_attention\": %.3f, \"max_rel_diff\": %.2e, "
        "\"output_max\": %.3e}\n",
        v.mode, p.stages, att_us, p.evict_first, ms * 1e3 / kLayers, gbs, gbs / copy_gbs,
        (ideal_us + att_us) / (ms * 1e3 / kLayers), worst, norm);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return 0;
}
