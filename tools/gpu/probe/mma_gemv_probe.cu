// tools/gpu/probe/mma_gemv_probe.cu — a diagnostic (the engine's kernel grew from it: matmul_mma_kernel in
// src/backend/cuda/matmul.cu, x split by a kernel of its own, fusions and the tuner): can a tensor-core decode matmul
// stream BF16 weights at the bandwidth for 1 to 64 rows, so that one kernel (and so one arithmetic) serves
// decode, batched decode and tree verification (batch invariance, DESIGN.md invariant 2)? The engine's
// decode kernel multiplies on CUDA cores and reads the weights once per row group, which for 8–64 rows
// falls far below the bandwidth (docs/benchmarks.md, tenth session).
//
// The kernel: y(R, n) = x(R, k) · w(n, k)ᵀ with mma.sync m16n8k16 (bf16 in, f32 accumulate), the weights as
// the A operand (16 output features, a block's tile) and the rows of x as B (n-tiles of 8 rows; R = 1 pads
// one tile with zero rows), over a persistent grid of feature tiles. Each of the block's 4 warps streams every
// 4th k step of the tile through its own cp.async ring in shared memory (XOR-swizzled 16-byte pieces, read by
// ldmatrix without bank conflicts), so a step needs only the warp's own wait and a __syncwarp; the warps' sums
// are added in warp order at the tile's end. x is BF16 ("bf16", rounded once, as the prefill path already
// does) or two BF16 rows per row ("split": hi = bf16(x), lo = bf16(x - hi), about 16 bits of x, both parts'
// products summed at the store, 4 rows per n-tile). (The first version, commit fb80320, also had block-wide
// rings with a barrier per stage: slower, docs/benchmarks.md.) Each output element is the dot product of one
// weight row and one x row accumulated in k order by the same instruction sequence whatever R is, so row r of
// an R-row call is bitwise row r alone: checked here for three rows of every call. No fusion, no
// programmatic dependent launch.
//
// Prints µs per call and GB/s of weight traffic (each call reads a different copy of the weights, together
// beyond the L2; a CUDA graph of the calls) beside the device-to-device copy bandwidth, for Qwen3-8B's
// shapes and R = 1 .. 64, and the largest difference from the F32 product of the unrounded x. The L2 evict_first hint
// the engine gives its weight loads raised "illegal instruction" in this build (compute-sanitizer: at the
// hinted cp.async; triton-lang/triton#11660 reports ptxas miscompiling fractional cache policies on cp.async,
// fixed in ptxas 13.4.59 — this toolkit is 13.0); "nohint" runs without it. Built and run by hand on the GPU machine:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -o mma_gemv_probe tools/gpu/probe/mma_gemv_probe.cu
//   ./mma_gemv_probe [stages: 4|6|8] [nohint]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(e)                                                                  \
  do {                                                                         \
    cudaError_t r_ = (e);                                                      \
    if (r_ != cudaSuccess) {                                                   \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(r_));   \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kStepK = 64;                  // k per warp per ring stage: 128 bytes of a row, 8 pieces of 16 bytes

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ void cp16(void* smem, const void* g, bool valid, uint64_t policy, bool hint) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;
  if (hint)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(d), "l"(g), "r"(n), "l"(policy)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(g), "r"(n) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(const void* p, uint32_t& a0, uint32_t& a1, uint32_t& a2, uint32_t& a3) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x2(const void* p, uint32_t& b0, uint32_t& b1) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(s));
}
__device__ __forceinline__ void mma_bf16(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Byte offset of 16-byte piece `c` (0..7) of row `r` in a tile of 128-byte rows, XOR-swizzled so that the
// eight rows an ldmatrix phase reads fall in eight different bank groups.
__device__ __forceinline__ int swz(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// One ring stage of a warp: its 16 weight rows (A, 128-byte swizzled rows at ws) times the 8 · NT x rows
// (B, at xs), kStepK of k, accumulated into the C fragments acc[n-tile].
template <int NT>
__device__ __forceinline__ void mma_stage(const uint8_t* ws, const uint8_t* xs, int lane, float (&acc)[NT][4]) {
#pragma unroll
  for (int kk = 0; kk < kStepK / 16; ++kk) {
    uint32_t a0, a1, a2, a3;
    const int ar = (lane & 7) + ((lane >> 3) & 1) * 8;
    ldmatrix_x4(ws + swz(ar, 2 * kk + (lane >> 4)), a0, a1, a2, a3);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      uint32_t b0, b1;
      ldmatrix_x2(xs + swz(j * 8 + (lane & 7), 2 * kk + ((lane >> 3) & 1)), b0, b1);
      mma_bf16(acc[j], a0, a1, a2, a3, b0, b1);
    }
  }
}

// Adds the kWarps warps' sums in warp order into warp 0's fragments, through red ([warp][NT · 4][32] floats);
// a block barrier between the writes and the reads.
template <int NT>
__device__ __forceinline__ void add_warps(float* red, int warp, int lane, float (&acc)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[(warp * NT * 4 + j * 4 + e) * 32 + lane] = acc[j][e];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
#pragma unroll
      for (int q = 1; q < kWarps; ++q) acc[j][e] = __fadd_rn(acc[j][e], red[(q * NT * 4 + j * 4 + e) * 32 + lane]);
}

struct Args {
  const __nv_bfloat16* x;  // (rows, k)
  const __nv_bfloat16* w;  // (n, k)
  float* y;                // (rows, n)
  int rows, n, k;
  bool hint;  // weights under the L2 evict_first policy (as the engine's decode matmul loads them)
};

// A warp's C fragments (features f0 + lane / 4 and + 8; rows 8j + 2 (lane % 4), + 1) into y's rows < rows.
template <int NT>
__device__ __forceinline__ void store_tile(const Args& a, int f0, int lane, const float (&acc)[NT][4]) {
  const int f = f0 + (lane >> 2);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int r = j * 8 + (lane & 3) * 2;
    if (r < a.rows) {
      a.y[static_cast<int64_t>(r) * a.n + f] = acc[j][0];
      a.y[static_cast<int64_t>(r) * a.n + f + 8] = acc[j][2];
    }
    if (r + 1 < a.rows) {
      a.y[static_cast<int64_t>(r + 1) * a.n + f] = acc[j][1];
      a.y[static_cast<int64_t>(r + 1) * a.n + f + 8] = acc[j][3];
    }
  }
}


// The split form's store: B column 2r holds row r's high BF16 part, 2r + 1 its remainder, so a thread's c0 + c1
// (c2 + c3) is row j·4 + lane % 4 of feature f0 + lane / 4 (+ 8).
template <int NT>
__device__ __forceinline__ void store_tile_split(const Args& a, int f0, int lane, const float (&acc)[NT][4]) {
  const int f = f0 + (lane >> 2);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int r = j * 4 + (lane & 3);
    if (r < a.rows) {
      a.y[static_cast<int64_t>(r) * a.n + f] = __fadd_rn(acc[j][0], acc[j][1]);
      a.y[static_cast<int64_t>(r) * a.n + f + 8] = __fadd_rn(acc[j][2], acc[j][3]);
    }
  }
}

// The warp-ring variant, 16 features a block: warp kw streams k steps kw, kw + 4, ... of the block's tile
// through its own ring (its 16 weight rows and the x rows of those k), so that waiting for its own copies
// and a __syncwarp is all the synchronisation a step needs; the four warps' sums are added in kw order
// at the tile's end (the one block barrier per tile).
// kSplit: x as two BF16 rows per row (x = hi + lo, to about 16 bits; Args::x holds 2 · rows rows), each
// n-tile 4 rows of x, the two parts' sums added at the store.
template <int NT, int S, bool kSplit = false>
__global__ void __launch_bounds__(kThreads) mma_gemv_warp_ring(const Args a) {
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kWBytes = 16 * kStepK * 2, kXBytes = NT * 8 * kStepK * 2, kStage = kWBytes + kXBytes;
  const int lane = threadIdx.x & 31, kw = threadIdx.x >> 5;
  uint8_t* ring = smem + kw * S * kStage;
  float* red = reinterpret_cast<float*>(smem + kWarps * S * kStage);  // [kw][NT · 4][32]
  const int ksteps = a.k / (kStepK * kWarps);  // this warp's steps per tile
  const int tiles = a.n / 16;
  const int my_tiles = (tiles - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int total = my_tiles * ksteps;
  const uint64_t policy = evict_first_policy();
  const bool hint = a.hint;
  auto issue = [&](int t) __attribute__((always_inline)) {
    uint8_t* stage = ring + (t % S) * kStage;
    if (t < total) {
      const int tile = static_cast<int>(blockIdx.x) + (t / ksteps) * static_cast<int>(gridDim.x);
      const int k0 = ((t % ksteps) * kWarps + kw) * kStepK;
      const __nv_bfloat16* w = a.w + static_cast<int64_t>(tile) * 16 * a.k + k0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int piece = j * 32 + lane, r = piece >> 3, c = piece & 7;
        cp16(stage + swz(r, c), w + static_cast<int64_t>(r) * a.k + c * 8, true, policy, hint);
      }
#pragma unroll
      for (int j = 0; j < 2 * NT; ++j) {
        const int piece = j * 32 + lane, r = piece >> 3, c = piece & 7;
        const bool valid = r < (kSplit ? 2 * a.rows : a.rows);
        cp16(stage + kWBytes + swz(r, c), a.x + static_cast<int64_t>(valid ? r : 0) * a.k + k0 + c * 8, valid, policy,
             false);
      }
    }
    commit();
  };
  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
  for (int t = 0; t < S - 1; ++t) issue(t);
  for (int t = 0; t < total; ++t) {
    issue(t + S - 1);
    wait_groups<S - 1>();
    __syncwarp();
    const uint8_t* ws = ring + (t % S) * kStage;
    mma_stage<NT>(ws, ws + kWBytes, lane, acc);
    __syncwarp();  // the stage is refilled by this warp's next issue
    if (t % ksteps == ksteps - 1) {
      const int tile = static_cast<int>(blockIdx.x) + (t / ksteps) * static_cast<int>(gridDim.x);
      add_warps<NT>(red, kw, lane, acc);
      if (kw == 0) {
        if (kSplit) store_tile_split<NT>(a, tile * 16, lane, acc);
        else store_tile<NT>(a, tile * 16, lane, acc);
      }
      __syncthreads();  // red is written again at the next tile's end
#pragma unroll
      for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    }
  }
}

// x (rows, k) F32 -> BF16 rounded (x1), and the split form x2 (2 · rows, k): hi = bf16(x), lo = bf16(x - hi).
__global__ void prepare_x(const float* xf, int64_t rows, int64_t k, __nv_bfloat16* x1, __nv_bfloat16* x2) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * k; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / k, c = i % k;
    const __nv_bfloat16 hi = __float2bfloat16(xf[i]);
    x1[i] = hi;
    x2[(2 * r) * k + c] = hi;
    x2[(2 * r + 1) * k + c] = __float2bfloat16(xf[i] - __bfloat162float(hi));
  }
}

__global__ void reference_f32(const float* xf, const __nv_bfloat16* w, float* y, int n, int k) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (f >= n) return;
  float s = 0.0f;
  for (int i = 0; i < k; ++i) s = fmaf(__bfloat162float(w[static_cast<int64_t>(f) * k + i]), xf[static_cast<int64_t>(r) * k + i], s);
  y[static_cast<int64_t>(r) * n + f] = s;
}

__global__ void fill_f32(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f;
  }
}

__global__ void fill(__nv_bfloat16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 32768.0f - 1.0f) * scale);
  }
}

using Kernel = void (*)(const Args);
template <int S, bool kSplit>
Kernel pick_nt(int nt) {
  switch (nt) {
    case 1: return mma_gemv_warp_ring<1, S, kSplit>;
    case 2: return mma_gemv_warp_ring<2, S, kSplit>;
    case 4: return mma_gemv_warp_ring<4, S, kSplit>;
    default: return mma_gemv_warp_ring<8, S, kSplit>;
  }
}
template <bool kSplit>
Kernel pick_kernel(int nt, int stages) {
  switch (stages) {
    case 4: return pick_nt<4, kSplit>(nt);
    case 6: return pick_nt<6, kSplit>(nt);
    default: return pick_nt<8, kSplit>(nt);
  }
}
Kernel pick_kernel(int nt, int stages, bool split) { return split ? pick_kernel<true>(nt, stages) : pick_kernel<false>(nt, stages); }
size_t smem_of(int nt, int stages) {
  return static_cast<size_t>(kWarps) * stages * (16 * kStepK * 2 + nt * 8 * kStepK * 2) + size_t{kWarps} * nt * 4 * 32 * 4;
}
// The grid: as many blocks as fit, or the tile count (0: the configuration does not fit).
int grid_of(Kernel kernel, size_t smem, int tiles, int sms, int* per_sm) {
  int limit = 0;
  CK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  if (smem > static_cast<size_t>(limit)) return 0;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel, kThreads, smem));
  return std::min(tiles, *per_sm * sms);
}

// The median of 5 timings of launch() on the stream, after one untimed, in milliseconds.
template <class F>
double median_ms(cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1, F&& launch) {
  std::vector<float> ms;
  for (int i = 0; i < 6; ++i) {
    CK(cudaEventRecord(e0, stream));
    launch();
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (i > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main(int argc, char** argv) {
  const int stages = argc > 1 ? std::atoi(argv[1]) : 6;
  const bool hint = !(argc > 2 && std::strcmp(argv[2], "nohint") == 0);
  if (stages != 4 && stages != 6 && stages != 8) {
    std::printf("stages must be 4, 6 or 8\n");
    return 2;
  }
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // Copy bandwidth: bytes read + written per second, 1 GiB, median of 5.
  double copy_gbps = 0;
  {
    const size_t bytes = size_t{1} << 30;
    void *src, *dst;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    const double ms = median_ms(stream, e0, e1, [&] { CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream)); });
    copy_gbps = 2.0 * bytes / (ms * 1e-3) / 1e9;
    CK(cudaFree(src));
    CK(cudaFree(dst));
  }
  std::printf("copy bandwidth %.0f GB/s; %d SMs; ring of %d stages; weights %s\n", copy_gbps, sms, stages,
              hint ? "under L2 evict_first" : "without an L2 hint");
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 24576, 4096}, {"down", 4096, 12288}};
  const int row_counts[] = {1, 2, 4, 8, 16, 32, 64};
  __nv_bfloat16 *x, *x2;
  float *xf, *y, *y_ref, *y_one;
  CK(cudaMalloc(&xf, sizeof(float) * 64 * 12288));
  CK(cudaMalloc(&x, sizeof(__nv_bfloat16) * 64 * 12288));
  CK(cudaMalloc(&x2, sizeof(__nv_bfloat16) * 128 * 12288));
  CK(cudaMalloc(&y, sizeof(float) * 64 * 24576));
  CK(cudaMalloc(&y_ref, sizeof(float) * 64 * 24576));
  CK(cudaMalloc(&y_one, sizeof(float) * 64 * 24576));
  fill_f32<<<256, 256, 0, stream>>>(xf, int64_t{64} * 12288, 7u);
  std::printf("%-8s %5s %6s %9s %9s %7s %12s %10s\n", "shape", "rows", "x", "us/call", "GB/s", "ratio", "max |diff|",
              "invariant");
  for (const Shape& s : shapes) {
    const int64_t w_elems = int64_t{s.n} * s.k, w_bytes = w_elems * 2;
    const int copies = static_cast<int>(std::max<int64_t>(8, (int64_t{600} << 20) / w_bytes + 1));
    __nv_bfloat16* w;
    CK(cudaMalloc(&w, w_bytes * copies));
    fill<<<1024, 256, 0, stream>>>(w, w_elems * copies, 11u, 1.0f / std::sqrt(static_cast<float>(s.k)));
    prepare_x<<<256, 256, 0, stream>>>(xf, 64, s.k, x, x2);
    for (int rows : row_counts)
      for (bool split : {false, true}) {
      const int rows_per_tile = split ? 4 : 8;  // the split form takes two B columns a row
      const int tiles_b = (rows + rows_per_tile - 1) / rows_per_tile;
      if (tiles_b > 8) continue;
      const int nt = tiles_b <= 1 ? 1 : tiles_b <= 2 ? 2 : tiles_b <= 4 ? 4 : 8;
      const __nv_bfloat16* xb = split ? x2 : x;
      const int64_t x_row = (split ? 2 : 1) * int64_t{s.k};  // a row's elements in xb
      const Kernel kernel = pick_kernel(nt, stages, split);
      const size_t smem = smem_of(nt, stages);
      int per_sm = 0;
      const int tiles = s.n / 16;
      const int grid = grid_of(kernel, smem, tiles, sms, &per_sm);
      const char* name = split ? "split" : "bf16";
      if (grid == 0) {
        std::printf("%-8s %5d %6s   (%zu bytes of shared memory: does not fit)\n", s.name, rows, name, smem);
        continue;
      }
      // The largest difference from the F32 product (x unrounded), and row invariance: rows computed alone
      // (R = 1, the same configuration otherwise) against the same rows of this call.
      Args a{xb, w, y, rows, s.n, s.k, hint};
      kernel<<<grid, kThreads, smem, stream>>>(a);
      reference_f32<<<dim3((s.n + 127) / 128, rows), 128, 0, stream>>>(xf, w, y_ref, s.n, s.k);
      std::vector<float> got(static_cast<size_t>(rows) * s.n), want(got.size()), alone(static_cast<size_t>(s.n));
      CK(cudaMemcpyAsync(got.data(), y, sizeof(float) * got.size(), cudaMemcpyDeviceToHost, stream));
      CK(cudaMemcpyAsync(want.data(), y_ref, sizeof(float) * want.size(), cudaMemcpyDeviceToHost, stream));
      bool invariant = true;
      for (int r : {0, rows / 2, rows - 1}) {
        const Kernel one = pick_kernel(1, stages, split);
        const size_t smem1 = smem_of(1, stages);
        int per_sm1 = 0;
        const int grid1 = grid_of(one, smem1, tiles, sms, &per_sm1);
        Args a1{xb + r * x_row, w, y_one, 1, s.n, s.k, hint};
        one<<<grid1, kThreads, smem1, stream>>>(a1);
        CK(cudaMemcpyAsync(alone.data(), y_one, sizeof(float) * s.n, cudaMemcpyDeviceToHost, stream));
        CK(cudaStreamSynchronize(stream));
        invariant &= std::memcmp(alone.data(), got.data() + static_cast<size_t>(r) * s.n, sizeof(float) * s.n) == 0;
      }
      CK(cudaStreamSynchronize(stream));
      CK(cudaGetLastError());
      double max_diff = 0;
      for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[i])));
      // Timing: a graph of `copies` calls, each on its own copy of the weights, replayed 5 times after one.
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int c = 0; c < copies; ++c) {
        Args ac{xb, w + c * w_elems, y, rows, s.n, s.k, hint};
        kernel<<<grid, kThreads, smem, stream>>>(ac);
      }
      CK(cudaStreamEndCapture(stream, &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      const double us = median_ms(stream, e0, e1, [&] { CK(cudaGraphLaunch(exec, stream)); }) * 1e3 / copies;
      const double gbps = w_bytes / (us * 1e-6) / 1e9;
      std::printf("%-8s %5d %6s %9.2f %9.0f %7.3f %12.3g %10s   (grid %d, %d blocks/SM)\n", s.name, rows, name, us,
                  gbps, gbps / copy_gbps, max_diff, invariant ? "yes" : "NO", grid, per_sm);
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(graph));
    }
    CK(cudaFree(w));
  }
  return 0;
}
