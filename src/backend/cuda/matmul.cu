// backend/cuda/matmul.cu — y(rows, n) = x(rows, k) · w(n, k)ᵀ [+ bias(n)]: the op entry, the decode kernel
// (rows 1..kMaxDecodeRows: decode, batched decode, tree verification) and the prefill path (cuBLASLt).
//
// Reduction order of the decode path (what batch invariance rests on). k is cut into chunks of 8
// elements (16 bytes of a 16-bit w row); with S = 32 · k_warps slices, slice s owns the chunks c with
// c mod S == s. Every output element is computed as
//   p_s  = fma-chain over the chunks of slice s in increasing c, each chunk's 8 elements in increasing
//          order, starting from +0 (one __fmaf_rn per element: acc = w·x + acc);
//   q_kw = the 32 slices kw·32 + lane of one warp summed by the butterfly xor 16, 8, 4, 2, 1;
//   y    = q_0 (k_warps 1), q_0 + q_1 (2), (q_0 + q_1) + (q_2 + q_3) (4); then y + bias, one rounding.
// That order depends on k and k_warps only. The row count picks how many rows a block carries (1, 2, 4
// or 8: registers) and how many blocks run, and other configuration fields pick which lanes and warps
// hold which features, none of which changes an element's arithmetic: a row computed alone or among 63
// others is bitwise the same. The kernel for unaligned operands (k % 8 != 0, or x/w not 16-byte
// aligned) performs the identical sequence with scalar loads, so even a misaligned view gives the same
// bits. Weights widen to f32 exactly (BF16/F16), and nothing is contracted or reassociated by the
// compiler (explicit __fmaf_rn/__fadd_rn).
//
// Prefill (rows > kMaxDecodeRows, k % 8 == 0, aligned operands): x is rounded to BF16 (F16 for F16 w)
// into Context::matmul_scratch and multiplied by cuBLASLt on the tensor cores with f32 accumulation and
// f32 output; F32 w runs a plain f32 GEMM (no TF32). Prefill rows differ from decode rows by the
// rounding of x (DESIGN.md: prefill may use another path). An F16 copy of x overflows to inf past
// ±65504: an F16-weight model with larger activations would need a scaled copy. Shapes cuBLASLt cannot
// take run the decode kernel, which works for any row count. The cuBLASLt heuristic is queried on every
// prefill call (host time only, a few microseconds against a GEMM of hundreds).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prologue.cuh"

namespace helium::cuda {
namespace {

constexpr int kChunk = 8;           // elements of k per chunk
constexpr int kMaxRowTile = 8;      // rows a decode block carries (acc registers: rows × features per lane)
constexpr int kMaxBlockWarps = 8;   // feature_warps · k_warps
constexpr int kMaxKWarps = 4;
// Shared memory for the block's x tile (rows × a whole number of rounds of chunks): at least 4 rounds and
// kXTileMinBytes, at most kXTileBudgetBytes; longer x goes in several tiles, staged as the rounds reach
// them. A small tile leaves the shared memory to the weight ring (more blocks per multiprocessor) and
// spreads the staging of a long x (down_proj's 12288, with SwiGLU applied) over the weight stream instead
// of stalling it up front. Performance only.
constexpr int64_t kXTileBudgetBytes = 64 * 1024;
constexpr int64_t kXTileMinBytes = 16 * 1024;
constexpr size_t kDefaultSmemLimit = 48 * 1024;  // above this a kernel needs cudaFuncSetAttribute

// ---------------------------------------------------------------------------------------------------
// Device helpers shared by both decode kernels: they are the reduction order.

__device__ __forceinline__ float warp_butterfly_sum(float v) {
#pragma unroll
  for (int offset = 16; offset >= 1; offset >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;  // the same bits on every lane: each step adds the same two values (a + b == b + a)
}

// p[kw · stride] for kw < k_warps (1, 2 or 4), summed in the fixed tree of the header comment.
__device__ __forceinline__ float k_warp_tree(const float* p, int stride, int k_warps) {
  if (k_warps == 1) return p[0];
  if (k_warps == 2) return __fadd_rn(p[0], p[stride]);
  return __fadd_rn(__fadd_rn(p[0], p[stride]), __fadd_rn(p[2 * stride], p[3 * stride]));
}

__device__ __forceinline__ float bias_at(const void* bias, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[i]);
    case DType::F16: return __half2float(static_cast<const __half*>(bias)[i]);
    default: return static_cast<const float*>(bias)[i];
  }
}

// One chunk (8 elements) of a w row: 16-byte loads and their exact widening to f32.
template <class WT>
struct WeightChunk;

template <>
struct WeightChunk<__nv_bfloat16> {
  static constexpr int kVecs = 1;  // 16-byte loads per chunk
  __device__ static void widen(const uint4* v, float* out) {
    const uint32_t words[4] = {v[0].x, v[0].y, v[0].z, v[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // element 2i is the low half of word i (little-endian)
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
  __device__ static float at(const void* w, int64_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
  }
};

template <>
struct WeightChunk<__half> {
  static constexpr int kVecs = 1;
  __device__ static void widen(const uint4* v, float* out) {
    const uint32_t words[4] = {v[0].x, v[0].y, v[0].z, v[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      __half2 h;
      static_assert(sizeof(h) == 4);
      memcpy(&h, &words[i], 4);
      const float2 f = __half22float2(h);  // .x = low half = element 2i
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
  __device__ static float at(const void* w, int64_t i) { return __half2float(static_cast<const __half*>(w)[i]); }
};

template <>
struct WeightChunk<float> {
  static constexpr int kVecs = 2;
  __device__ static void widen(const uint4* v, float* out) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      out[4 * i] = __uint_as_float(v[i].x);
      out[4 * i + 1] = __uint_as_float(v[i].y);
      out[4 * i + 2] = __uint_as_float(v[i].z);
      out[4 * i + 3] = __uint_as_float(v[i].w);
    }
  }
  __device__ static float at(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
};

// 16 bytes global -> shared without registers; zero-filled when !valid (src is then never read). With
// `hinted`, under the L2 policy `policy` (evict_first_policy, the default). Without evict_first no hint is
// given at all: on the H200 an explicit evict_normal policy (on these loads and decode attention's) ran
// the 1K decode at 162.9 tok/s against 184.6 unhinted (docs/benchmarks.md, fourth session).
__device__ __forceinline__ void copy_async_16(void* smem, const void* gmem, bool valid, bool hinted, uint64_t policy) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  if (hinted)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst), "l"(gmem),
                 "r"(src_bytes), "l"(policy)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void copy_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// What the decode kernel applies to x as it stages it into shared memory (fused ops; arithmetic shared with
// the unfused kernels through elementwise.cuh, so fused and unfused results are bitwise the same):
//   kNone     x as it is;
//   kRmsNorm  rms_norm(x, norm_w, eps, zero_centred), each row's scale computed by every block that
//             carries the row (a k-length read of x from L2);
//   kSwiGLU   silu(x) · up, x being the gate projection.
enum XForm : int { kNone = 0, kRmsNorm = 1, kSwiGLU = 2 };

// Outputs: features [0, n) are cut into `splits` consecutive ranges ending at split_end[i], each written
// to its own (rows, width_i) tensor y[i] (one split: y[0] is the whole (rows, n) output).
struct DecodeParams {
  const float* x;     // (rows, k)
  const void* w;      // (n, k)
  const void* bias;   // (n) or null
  DType bias_dtype;
  float* y[Backend::kMaxMatmulSplits];
  int64_t split_end[Backend::kMaxMatmulSplits];
  int splits;
  bool accumulate;  // y += result (one split): the residual add, the same rounding as a separate add
  int xform;         // XForm
  const void* norm_w;  // kRmsNorm: (k) weights of norm_dtype
  DType norm_dtype;
  float eps;
  bool zero_centred;
  const float* up;  // kSwiGLU: (rows, k)
  // SwiGLU pairs (act non-null; no split outputs): w is [gate; up] stacked, n = 2 · half_n; each warp's FT
  // features are FT/2 gate rows and the FT/2 up rows of the same positions, and the store writes
  // act(rows, half_n) = silu_mul(gate, up), each of the two bitwise what matmul_split gives.
  float* act;
  int64_t half_n;
  int64_t rows, n, k;
  int feature_warps, k_warps;
  int64_t row_groups;     // ceil(rows / RT)
  int64_t feature_blocks;  // ceil(n / (feature_warps · FT)) (pairs: of half_n by FT/2): items = row_groups · feature_blocks
  int tile_rounds;         // rounds of chunks per x tile (aligned kernel)
  bool evict_first;        // w loaded with the L2 evict_first policy (Context::stream_evict_first)
  bool early_trigger;      // the next kernel may launch once the first rounds are issued (Context)
  const __nv_bfloat16* x_split;  // tensor-core kernel: (2 · rows, k) split of the transformed x (split_x_kernel)
  __nv_bfloat16* act_split;      // tensor-core kernel, pairs: also act's split (2 · rows, half_n), or null
  // Norm handoff (tensor-core kernel; cuda_ops.cuh, NormHandoff). A producer (one accumulating output, the
  // residual add) also writes the split of each stored value times the next RMSNorm's weight,
  // split(v · w'), into next_split (2 · rows, n), and each 16-feature item's sum of squares of the stored
  // values into next_sq (rows, feature_blocks). A consumer (x_split pointing at such a split) multiplies
  // each output by its row's scale rsqrt(Σ next_sq / k + eps) before the bias: the norm applied after the
  // matmul instead of before the split, no split kernel between the two.
  __nv_bfloat16* next_split;
  float* next_sq;
  const void* next_norm_w;
  DType next_norm_dtype;
  bool next_zero_centred;
  const float* row_sq;  // consumer: the producer's next_sq, (rows, sq_blocks); null otherwise
  int64_t sq_blocks;
  unsigned long long* trace;  // Context::matmul_trace, or null
};

// Where output (row, feature) lives: the split that holds the feature.
__device__ __forceinline__ float* output_at(const DecodeParams& p, int64_t row, int64_t feature) {
  int i = 0;
  int64_t begin = 0;
  while (i + 1 < p.splits && feature >= p.split_end[i]) begin = p.split_end[i++];
  return p.y[i] + row * (p.split_end[i] - begin) + (feature - begin);
}
// prior: the output's value before this op when accumulating (read earlier by the caller), else it is read here.
// Returns the value stored.
__device__ __forceinline__ float store_output_at(const DecodeParams& p, float* out, float v,
                                                 const float* prior) {
  const float stored = p.accumulate ? __fadd_rn(prior != nullptr ? *prior : *out, v) : v;
  *out = stored;
  return stored;
}
__device__ __forceinline__ float store_output(const DecodeParams& p, int64_t row, int64_t feature, float v,
                                              const float* prior = nullptr) {
  return store_output_at(p, output_at(p, row, feature), v, prior);
}

// This block's %globaltimer stamp of `event` into Context::matmul_trace (thread 0; nothing without a trace).
__device__ __forceinline__ void trace_stamp(const DecodeParams& p, int event) {
  if (p.trace != nullptr && threadIdx.x == 0) p.trace[blockIdx.x * kMatmulTraceEvents + event] = globaltimer_ns();
}

// ---------------------------------------------------------------------------------------------------
// The decode kernel. Work item i carries rows [row_group · RT, +RT) and features
// [(feature_block · feature_warps + fw) · FT, +FT) for each of its feature warps fw, with items numbered
// row group fastest (i = feature_block · row_groups + row_group). The grid is persistent: block b takes
// items b, b + gridDim.x, ... (the grid is a multiple of row_groups, so a block keeps one row group and
// stages its x — and computes its RMSNorm scales — once, not once per item).
// Lane `lane` of warp (fw, kw) is slice s = kw · 32 + lane. Each round j of an item, the lane reads
// chunk c = s + j·S of each of its FT w rows and multiplies it with the RT rows of x held in shared
// memory (staged tile by tile when x does not fit at once). The w chunks travel through a per-thread ring
// of RIF rounds in shared memory filled with cp.async (16 bytes each, one commit group per round): RIF
// rounds are in flight without holding registers, the stream runs on from one item into the next (its
// first rounds load while the current item finishes), and a thread only ever reads the slots it filled
// itself, so waiting for its own groups is all the synchronisation the ring needs. An item's rounds are
// padded to a multiple of RIF (empty rounds load nothing). Warps of one k-slice read 512 contiguous
// bytes of a w row per copy. Features past n load row n-1 (a valid address) and are never stored; rows
// past `rows` multiply zeros and are never stored.
template <class WT, int RT, int FT, int RIF>
__global__ void __launch_bounds__(kMaxBlockWarps * 32)
    matmul_decode_kernel(const DecodeParams p) {
  using Chunk = WeightChunk<WT>;
  constexpr int kVecs = Chunk::kVecs;
  static_assert(RT * FT <= 32, "one lane stores one output of its warp");
  extern __shared__ float4 smem[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k_warps = p.k_warps, S = 32 * k_warps;
  const int kw = warp % k_warps, fw = warp / k_warps;
  const int s = kw * 32 + lane;
  const int64_t row_group = blockIdx.x % p.row_groups;  // the same for all of this block's items
  const int64_t row0 = row_group * RT;
  const int64_t items = p.row_groups * p.feature_blocks;
  const int nchunks = static_cast<int>(p.k / kChunk);
  const int rounds = (nchunks + S - 1) / S;
  const int padded_rounds = (rounds + RIF - 1) / RIF * RIF;
  const int tile_chunks = p.tile_rounds * S;
  const bool one_tile = p.tile_rounds >= rounds;
  float4* x_tile = smem;  // [RT][2][tile_chunks]: the two float4 halves of a chunk in separate planes,
                          // so that a warp's 32 consecutive chunks are 512 contiguous bytes (no conflicts)
  // [k_warps][feature_warps][32] at the end of an item; kRmsLanes partial sums of a row's squares first.
  float* partial = reinterpret_cast<float*>(smem + RT * 2 * tile_chunks);
  float* row_scale = partial + kRmsLanes;  // [RT]: kRmsNorm's scale of each row
  // [RIF][FT · kVecs][blockDim] 16-byte slots: consecutive threads own consecutive slots.
  uint4* ring = reinterpret_cast<uint4*>(smem + RT * 2 * tile_chunks) + (kRmsLanes + kMaxRowTile) / 4;
  const uint64_t policy = evict_first_policy();
  trace_stamp(p, 0);

  // The first output position of this warp in the block's iter-th item (FT features each, or FT/2 pairs),
  // and the w row of its feature f (n - 1 bounds the address of features past n).
  const bool pairs = p.act != nullptr;
  auto item_feature0 = [&](int64_t iter) {
    const int64_t item = blockIdx.x + iter * gridDim.x;
    return ((item / p.row_groups) * p.feature_warps + fw) * (pairs ? FT / 2 : FT);
  };
  auto w_row = [&](int64_t f0, int f) {
    return min(pairs && f >= FT / 2 ? p.half_n + f0 + (f - FT / 2) : f0 + f, p.n - 1);
  };
  auto item_exists = [&](int64_t iter) { return blockIdx.x + iter * gridDim.x < items; };
  // Round j of the item whose warp features start at f0 into ring slot j % RIF (`slot`, passed as a
  // constant), as one commit group: empty past the end of k or of the items (valid false), so that every
  // thread commits alike.
  auto issue_round = [&](int64_t f0, bool valid, int j, int slot) {
    const int c = s + j * S;
    if (c < nchunks && valid) {
#pragma unroll
      for (int f = 0; f < FT; ++f) {
        const char* row = static_cast<const char*>(p.w) + w_row(f0, f) * p.k * static_cast<int64_t>(sizeof(WT));
#pragma unroll
        for (int v = 0; v < kVecs; ++v)
          copy_async_16(&ring[(slot * FT * kVecs + f * kVecs + v) * blockDim.x + threadIdx.x],
                        row + (static_cast<int64_t>(c) * kChunk * sizeof(WT) + v * 16), true, p.evict_first, policy);
      }
    }
    copy_async_commit();
  };
  // x (with its transform) into the tile. Each thread loads kStageBatch float4s (and their up or norm
  // weights) before it transforms and stores any of them, so that a tile costs about one L2 round trip
  // rather than one per float4: the weight stream stalls while x is staged.
  auto stage_x_tile = [&](int first_round) {
    constexpr int kStageBatch = 4;
    const int64_t first_chunk = static_cast<int64_t>(first_round) * S;
    const int count = RT * tile_chunks * 2;  // float4s
    for (int i0 = threadIdx.x; i0 < count; i0 += kStageBatch * blockDim.x) {
      float4 v[kStageBatch], aux[kStageBatch];  // x; up (kSwiGLU) or the norm weights (kRmsNorm)
      int64_t col[kStageBatch];
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int i = i0 + b * blockDim.x;
        const int r = i / (tile_chunks * 2), g = i % (tile_chunks * 2);
        const int cl = g >> 1, half = g & 1;  // g runs along x's memory: chunk-major, then half
        const int64_t row = row0 + r, chunk = first_chunk + cl;
        const bool valid = i < count && row < p.rows && chunk < nchunks;
        col[b] = valid ? chunk * kChunk + half * 4 : -1;
        v[b] = aux[b] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (!valid) continue;
        // Plain loads (not cp.async: the ring's commit groups are counted per thread).
        const int64_t offset = row * p.k + col[b];
        v[b] = *reinterpret_cast<const float4*>(p.x + offset);
        if (p.xform == kSwiGLU) {
          aux[b] = *reinterpret_cast<const float4*>(p.up + offset);
        } else if (p.xform == kRmsNorm) {
          aux[b] = make_float4(load_as_f32(p.norm_w, col[b], p.norm_dtype), load_as_f32(p.norm_w, col[b] + 1, p.norm_dtype),
                               load_as_f32(p.norm_w, col[b] + 2, p.norm_dtype),
                               load_as_f32(p.norm_w, col[b] + 3, p.norm_dtype));
        }
      }
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int i = i0 + b * blockDim.x;
        if (i >= count) break;
        const int r = i / (tile_chunks * 2), g = i % (tile_chunks * 2);
        float* e = &v[b].x;
        const float* a = &aux[b].x;
        if (col[b] >= 0 && p.xform == kRmsNorm) {
#pragma unroll
          for (int j = 0; j < 4; ++j) e[j] = rms_apply(e[j], row_scale[r], a[j], p.zero_centred);
        } else if (col[b] >= 0 && p.xform == kSwiGLU) {
#pragma unroll
          for (int j = 0; j < 4; ++j) e[j] = silu_mul(e[j], a[j]);
        }
        x_tile[(r * 2 + (g & 1)) * tile_chunks + (g >> 1)] = v[b];
      }
    }
  };

  // The first rounds of w do not depend on the previous kernel: under programmatic dependent launch they
  // are loaded while it drains, and only then does the block wait for its results (x).
  {
    const int64_t f0 = item_feature0(0);
    const bool valid = item_exists(0);
#pragma unroll
    for (int u = 0; u < RIF; ++u) issue_round(f0, valid, u, u);
  }
  // The norm weights do not depend on it either: into this multiprocessor's L1 for the staging.
  if (p.xform == kRmsNorm) {
    const int64_t lines = (p.k * (p.norm_dtype == DType::F32 ? 4 : 2) + 127) / 128;
    for (int64_t i = threadIdx.x; i < lines; i += blockDim.x)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(static_cast<const char*>(p.norm_w) + i * 128));
  }
  trace_stamp(p, 1);
  if (p.early_trigger) pdl_launch_dependents();
  pdl_wait();
  trace_stamp(p, 2);

  if (p.xform == kRmsNorm) {  // each row's scale, before any tile is staged (tiles need the whole row)
    for (int r = 0; r < RT; ++r) {
      const int64_t row = min(row0 + r, p.rows - 1);  // rows past the end: any valid row (never stored)
      for (int v = threadIdx.x; v < kRmsLanes; v += blockDim.x) partial[v] = rms_partial(p.x + row * p.k, p.k, v);
      rms_scale_block(partial, p.k, p.eps, &row_scale[r]);  // ends with a barrier: partial may be reused
    }
  }
  if (one_tile) {  // x stays in shared memory for all of the block's items
    stage_x_tile(0);
    __syncthreads();
    trace_stamp(p, 3);
  }

  for (int64_t iter = 0; item_exists(iter); ++iter) {
    const int64_t f0 = item_feature0(iter), next_f0 = item_feature0(iter + 1);
    const bool next_valid = item_exists(iter + 1);
    // The value this lane's output is added to (accumulate: one split, y[0] is (rows, n)), read now and
    // used at the item's end, so that the store does not wait for a read.
    float prior = 0.0f;
    if (p.accumulate && kw == 0 && lane < RT * FT) {
      const int64_t row = row0 + lane / FT, feature = f0 + lane % FT;
      if (row < p.rows && feature < p.n) prior = p.y[0][row * p.n + feature];
    }
    float acc[RT][FT];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int f = 0; f < FT; ++f) acc[r][f] = 0.0f;

    int tile_first_round = 0, next_tile_round = one_tile ? padded_rounds : 0;
    for (int j0 = 0; j0 < padded_rounds; j0 += RIF) {
#pragma unroll
      for (int u = 0; u < RIF; ++u) {
        const int j = j0 + u;  // uniform over the block, so the barriers below are too
        if (j == next_tile_round && j < rounds) {
          __syncthreads();  // everyone is done with the previous tile (or item)
          stage_x_tile(j);
          __syncthreads();
          if (iter == 0 && j == 0) trace_stamp(p, 3);
          tile_first_round = j;
          next_tile_round = j + p.tile_rounds;
        }
        copy_async_wait_group<RIF - 1>();  // round j (slot u) has landed for this thread
        uint4 cur[FT][kVecs];
#pragma unroll
        for (int f = 0; f < FT; ++f)
#pragma unroll
          for (int v = 0; v < kVecs; ++v) cur[f][v] = ring[(u * FT * kVecs + f * kVecs + v) * blockDim.x + threadIdx.x];
        const int c = s + j * S;
        if (c < nchunks) {
          float wv[FT][kChunk];
#pragma unroll
          for (int f = 0; f < FT; ++f) Chunk::widen(cur[f], wv[f]);
          const int cl = s + (j - tile_first_round) * S;
#pragma unroll
          for (int r = 0; r < RT; ++r) {
            const float4 lo = x_tile[(r * 2) * tile_chunks + cl];
            const float4 hi = x_tile[(r * 2 + 1) * tile_chunks + cl];
            const float xv[kChunk] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int f = 0; f < FT; ++f)
#pragma unroll
              for (int e = 0; e < kChunk; ++e) acc[r][f] = __fmaf_rn(wv[f][e], xv[e], acc[r][f]);
          }
        }
        // Refill slot u with round j + RIF of the stream (this item's or the next one's); issued after
        // cur has been used (in-order issue: the reads of the slot are complete).
        if (j + RIF < padded_rounds) issue_round(f0, true, j + RIF, u);
        else issue_round(next_f0, next_valid, j + RIF - padded_rounds, u);
      }
    }

    // Output (r, f) of this warp ends on lane r·FT + f.
    float mine = 0.0f;
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int f = 0; f < FT; ++f) {
        const float v = warp_butterfly_sum(acc[r][f]);
        if (lane == r * FT + f) mine = v;
      }
    bool store = true;
    if (k_warps > 1) {
      partial[(kw * p.feature_warps + fw) * 32 + lane] = mine;
      __syncthreads();
      store = kw == 0;
      if (store) mine = k_warp_tree(&partial[fw * 32 + lane], p.feature_warps * 32, k_warps);
      __syncthreads();  // partial is written again by the next item
    }
    if (pairs) {
      if (store) {  // uniform over the warp: the shuffle is the whole warp's
        // The gate of lane r·FT + f (f < FT/2) meets its up on lane r·FT + f + FT/2.
        float up = __shfl_down_sync(0xffffffffu, mine, FT / 2);
        const int64_t row = row0 + lane / FT, position = f0 + lane % FT;
        if (lane < RT * FT && lane % FT < FT / 2 && row < p.rows && position < p.half_n) {
          if (p.bias != nullptr) {
            mine = __fadd_rn(mine, bias_at(p.bias, p.bias_dtype, position));
            up = __fadd_rn(up, bias_at(p.bias, p.bias_dtype, p.half_n + position));
          }
          p.act[row * p.half_n + position] = silu_mul(mine, up);
        }
      }
    } else if (store && lane < RT * FT) {
      const int64_t row = row0 + lane / FT, feature = f0 + lane % FT;
      if (row < p.rows && feature < p.n) {
        if (p.bias != nullptr) mine = __fadd_rn(mine, bias_at(p.bias, p.bias_dtype, feature));
        store_output(p, row, feature, mine, &prior);
      }
    }
    if (iter == 0) trace_stamp(p, 4);
  }
  copy_async_wait_group<0>();  // only empty groups remain; nothing may land after the block exits
  trace_stamp(p, 5);
  if (!p.early_trigger) pdl_launch_dependents();  // every load of w is done: the next kernel may take the SMs
}

// The same arithmetic for operands the vector kernel cannot load (k % 8 != 0, or x or w not 16-byte
// aligned): one block of k_warps warps per (feature, row), scalar loads. Speed is not its purpose.
template <class WT>
__global__ void __launch_bounds__(kMaxKWarps * 32) matmul_decode_unaligned_kernel(const DecodeParams p,
                                                                                  int64_t row_offset) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  __shared__ float partial[kMaxKWarps];
  const int lane = threadIdx.x & 31, kw = threadIdx.x >> 5;
  const int k_warps = p.k_warps, S = 32 * k_warps;
  const int s = kw * 32 + lane;
  const int64_t feature = blockIdx.x, row = row_offset + blockIdx.y;
  const int64_t nchunks = (p.k + kChunk - 1) / kChunk;
  const float* x = p.x + row * p.k;
  const int64_t w_base = feature * p.k;
  float acc = 0.0f;
  for (int64_t c = s; c < nchunks; c += S) {
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      const int64_t i = c * kChunk + e;
      if (i < p.k) acc = __fmaf_rn(WeightChunk<WT>::at(p.w, w_base + i), x[i], acc);
    }
  }
  float sum = warp_butterfly_sum(acc);
  if (k_warps > 1) {
    if (lane == 0) partial[kw] = sum;
    __syncthreads();
    sum = k_warp_tree(partial, 1, k_warps);
  }
  if (threadIdx.x == 0) {
    if (p.bias != nullptr) sum = __fadd_rn(sum, bias_at(p.bias, p.bias_dtype, feature));
    store_output(p, row, feature, sum);
  }
}

// ---------------------------------------------------------------------------------------------------
// The tensor-core decode kernel (MatmulDecodeConfig::mma_stages > 0; BF16 w, k % 8 == 0, w 16-byte
// aligned). The CUDA-core kernel above multiplies every weight by every row on the FMA units, which for 8
// to 64 rows is far below the bandwidth (docs/benchmarks.md); here mma.sync m16n8k16 multiplies 16 weight
// rows (A) by the rows of x (B), so one weight stream serves every row of a row group.
//
// x is split so that BF16 multiplies lose no more than f32 would: a first kernel (split_x_kernel) applies
// the fused transform to x with the unfused ops' arithmetic (rms_norm's, silu_mul) and writes each element
// v as hi = bf16(v) and lo = bf16(v - hi) (v to within 2^-18 |v|) into Context::matmul_scratch: row 2r of the
// split holds row r's hi parts, row 2r + 1 its remainders, which become neighbouring B columns; both
// products are exact in the f32 accumulators. Converting once per element there, not once per work item
// here, keeps the MMA loop at two ldmatrix and one MMA per 16 × 16 weights (the per-item conversion ran at
// 36-52% of the bandwidth at one row; eleventh session).
//
// Reduction order (what batch invariance rests on). k is cut into steps of 64; warp kw of the block's 4
// takes steps kw, kw + 4, ... and, for each output, accumulates its steps in increasing order in its MMA
// accumulators, starting from +0 (16 k per MMA, 4 per step). y = ((a_0 + a_1) + a_2) + a_3 over the warps,
// each a_kw being its hi column plus its lo column; then + bias, then + the prior value (residual). An
// output's MMA column only ever meets its own row's data, and which column a row takes, how many rows a
// block carries (4, 8 or 16), the grid and the ring depth change no arithmetic: a row computed alone or
// among 63 others is bitwise the same.
//
// Pipeline: each warp streams its steps through its own ring of S stages in shared memory (the 16 weight
// rows and the 2 · RG split rows, XOR-swizzled for ldmatrix), filled with cp.async, one commit group per
// stage, so a stage needs only the warp's own wait and a __syncwarp. The weights of the first S - 1
// stages are issued before the programmatic-dependent-launch wait (they do not depend on the previous
// kernel), the split x's after it. The grid is persistent over items (16 features — 8 gate/up pairs — of
// one row group; row group fastest), and the stream runs on from one item into the next.
constexpr int kMmaWarps = 4;
constexpr int kMmaStepK = 64;                             // k of one warp stage: 128 bytes of a w row
constexpr int kMmaFeatures = 16;                          // w rows of an item (A)
constexpr int kMmaWBytes = kMmaFeatures * kMmaStepK * 2;  // the stage's weights
constexpr int kMaxMmaRowGroup = 16;

// A warp stage: the 16 weight rows, then the 2 · RG split rows of x. RG 1 (one-row launches,
// Context::mma_one_row_stages) stores x's two split rows only: its B columns 2..7 read them again (their
// sums belong to no row and are never stored), so a stage is 2,304 bytes, not 3,072, and more blocks fit.
__host__ __device__ constexpr int mma_stage_bytes(int row_group) { return kMmaWBytes + 2 * row_group * kMmaStepK * 2; }
// The whole block: the warps' rings, the sums of warps 1..3 [kw - 1][NT · 4][32] (warp 0 keeps its own),
// then a norm handoff consumer's row scales (mma_row_scales). Row groups of 4 and more keep a fourth warp's
// worth of sums, the q/k/v prologue's scratch (kRmsLanes + head_dim floats, rms_norm_qkv_prologue); RG 1
// does without, and keeps its one row scale there too (no static shared memory: how many blocks share a
// multiprocessor is one_row_block_smem's choice alone).
constexpr int mma_sum_floats(int row_group) {
  return (row_group == 1 ? kMmaWarps - 1 : kMmaWarps) * ((row_group + 3) / 4) * 4 * 32;
}
constexpr int mma_row_scales(int row_group) { return row_group == 1 ? 4 : kMaxDecodeRows; }  // 16-byte multiple
constexpr size_t mma_smem_bytes(int row_group, int stages) {
  return static_cast<size_t>(kMmaWarps) * stages * mma_stage_bytes(row_group) +
         static_cast<size_t>(mma_sum_floats(row_group) + mma_row_scales(row_group)) * 4;
}

// Byte offset of 16-byte piece c (0..7) of row r in a stage tile of 128-byte rows, XOR-swizzled so that the
// eight rows an ldmatrix phase reads fall in eight different bank groups.
__device__ __forceinline__ int mma_swizzle(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

__device__ __forceinline__ void ldmatrix_x2(uint32_t& b0, uint32_t& b1, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(shared_address(p)));
}

// x (rows, k) f32 -> its transform (XForm: rms_norm's or silu_mul's arithmetic) split into (2 · rows, k) BF16:
// row 2r = bf16(v), row 2r + 1 = bf16(v - bf16(v)). Block (c, r) of kRmsLanes threads writes elements
// [c · kSplitChunk, +kSplitChunk) of row r, each thread 8 of them (one 16-byte store per part), its loads
// issued together; a fused RMSNorm's scale is computed by every block of the row (a k-long read from L2,
// rms_norm's arithmetic). The matmul may launch at once: its wait covers this kernel's writes, and its
// weight loads before the wait do not depend on them.
constexpr int kSplitChunk = kRmsLanes * 8;
__global__ void __launch_bounds__(kRmsLanes) split_x_kernel(const DecodeParams p, __nv_bfloat16* out) {
  pdl_launch_dependents();
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  __shared__ float partial[kRmsLanes];
  __shared__ float scale_slot;
  const int64_t row = blockIdx.y, i0 = int64_t{blockIdx.x} * kSplitChunk + threadIdx.x * 8;
  const float* x = p.x + row * p.k;
  float v[8], aux[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int64_t i = i0 + e;
    v[e] = i < p.k ? x[i] : 0.0f;
    aux[e] = 0.0f;
    if (i < p.k && p.xform == kRmsNorm) aux[e] = load_as_f32(p.norm_w, i, p.norm_dtype);
    else if (i < p.k && p.xform == kSwiGLU) aux[e] = p.up[row * p.k + i];
  }
  if (p.xform == kRmsNorm) {
    partial[threadIdx.x] = rms_partial(x, p.k, threadIdx.x);
    const float scale = rms_scale_block(partial, p.k, p.eps, &scale_slot);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = rms_apply(v[e], scale, aux[e], p.zero_centred);
  } else if (p.xform == kSwiGLU) {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = silu_mul(v[e], aux[e]);
  }
  if (i0 >= p.k) return;
  __align__(16) __nv_bfloat16 hi[8], lo[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) split_bf16(v[e], hi[e], lo[e]);
  // k % 8 == 0 (the kernel's operands): the 8 elements are whole and 16-byte aligned.
  *reinterpret_cast<uint4*>(out + 2 * row * p.k + i0) = *reinterpret_cast<const uint4*>(hi);
  *reinterpret_cast<uint4*>(out + (2 * row + 1) * p.k + i0) = *reinterpret_cast<const uint4*>(lo);
}

// The store of one n-tile of an item once the warps' sums are in c (the MMA accumulators of tile rows
// row0 .. row0 + 3: c[0], c[1] the hi and lo columns of feature block · 16 + lane / 4, c[2], c[3] those of
// feature + 8): the row scale of a norm handoff's consumer, the bias, the residual, a handoff's producer
// sums and split, SwiGLU pairs. Every kernel on the tensor-core order stores through it (matmul_mma_kernel,
// matmul_stream_kernel), which keeps their bits the same. All 32 lanes call it (the handoff's sums shuffle).
__device__ __forceinline__ void mma_store_tile(const DecodeParams& p, int block, int row0, const float (&c)[4],
                                               const float* row_scale, int lane) {
  const bool pairs = p.act != nullptr;
  const int64_t row = row0 + (lane & 3);  // columns 2(lane % 4) and + 1 of the tile
  float y0 = __fadd_rn(c[0], c[1]), y1 = __fadd_rn(c[2], c[3]);  // features +0, +8 of the tile
  const bool live = row < p.rows;
  if (p.row_sq != nullptr && live) {  // a norm handoff's consumer: the row's scale, before the bias
    y0 = __fmul_rn(row_scale[row], y0);
    y1 = __fmul_rn(row_scale[row], y1);
  }
  if (pairs) {  // y0 the gate, y1 the up of one position
    if (!live) return;
    const int64_t position = int64_t{block} * (kMmaFeatures / 2) + (lane >> 2);
    if (position < p.half_n) {
      if (p.bias != nullptr) {
        y0 = __fadd_rn(y0, bias_at(p.bias, p.bias_dtype, position));
        y1 = __fadd_rn(y1, bias_at(p.bias, p.bias_dtype, p.half_n + position));
      }
      const float a = silu_mul(y0, y1);
      p.act[row * p.half_n + position] = a;
      if (p.act_split != nullptr)  // split_x_kernel's split of a, for the down projection
        split_bf16(a, p.act_split[2 * row * p.half_n + position], p.act_split[(2 * row + 1) * p.half_n + position]);
    }
    return;
  }
  // Every load the stores need — the residual's prior values, the bias, a handoff producer's next norm
  // weights — issued together before the first store, so that the item's end waits on one L2 round trip:
  // behind stores the compiler cannot tell apart from them, the loads of store_output (the residual of
  // feature f, then of f + 8) and the weights after them were issued one after another. On an H100
  // (Qwen3-8B shape, 256 tokens, three rounds back to back; docs/benchmarks.md, forty-third session) 1K
  // decoded at 182.71 / 182.19 / 182.67 tok/s against 182.09 / 182.33 / 182.25, 32K at 142.98 / 142.91 /
  // 142.42 against 142.10 / 142.59 / 142.66: level or a little faster, the same bits.
  const int64_t f = int64_t{block} * kMmaFeatures + (lane >> 2);
  const bool has0 = live && f < p.n, has1 = live && f + 8 < p.n;
  float* out0 = has0 ? output_at(p, row, f) : nullptr;
  float* out1 = has1 ? output_at(p, row, f + 8) : nullptr;
  const float prior0 = has0 && p.accumulate ? *out0 : 0.0f;
  const float prior1 = has1 && p.accumulate ? *out1 : 0.0f;
  const float b0 = has0 && p.bias != nullptr ? bias_at(p.bias, p.bias_dtype, f) : 0.0f;
  const float b1 = has1 && p.bias != nullptr ? bias_at(p.bias, p.bias_dtype, f + 8) : 0.0f;
  const bool producer = p.next_split != nullptr;  // a norm handoff's producer (one accumulating output)
  const float w0 = producer && has0 ? load_as_f32(p.next_norm_w, f, p.next_norm_dtype) : 0.0f;
  const float w1 = producer && has1 ? load_as_f32(p.next_norm_w, f + 8, p.next_norm_dtype) : 0.0f;
  float v0 = 0.0f, v1 = 0.0f;
  if (has0) v0 = store_output_at(p, out0, p.bias != nullptr ? __fadd_rn(y0, b0) : y0, &prior0);
  if (has1) v1 = store_output_at(p, out1, p.bias != nullptr ? __fadd_rn(y1, b1) : y1, &prior1);
  if (!producer) return;
  float sq = __fmaf_rn(v1, v1, __fmul_rn(v0, v0));  // the 16 features of the item, a fixed tree:
#pragma unroll
  for (int o = 4; o <= 16; o <<= 1) sq = __fadd_rn(sq, __shfl_xor_sync(0xffffffffu, sq, o));
  if (!live) return;
  if ((lane >> 2) == 0) p.next_sq[row * p.feature_blocks + block] = sq;
  __nv_bfloat16* hi = p.next_split + 2 * row * p.n;
  __nv_bfloat16* lo = hi + p.n;
  if (f < p.n) split_bf16(__fmul_rn(v0, p.next_zero_centred ? __fadd_rn(1.0f, w0) : w0), hi[f], lo[f]);
  if (f + 8 < p.n)
    split_bf16(__fmul_rn(v1, p.next_zero_centred ? __fadd_rn(1.0f, w1) : w1), hi[f + 8], lo[f + 8]);
}

// A norm handoff consumer's scale of row r (DecodeParams::row_sq): lane l sums items l, l + 32, ... in order,
// then a butterfly (the same total in every lane); RMSNorm's formula rsqrt(sum / k + eps). One whole warp
// calls it. The sums are read from the L2 (the layer stream writes them in the same launch).
__device__ __forceinline__ float handoff_row_scale(const DecodeParams& p, int64_t r, int lane) {
  float sum = 0.0f;
#pragma unroll 8  // the loads issued together (the sum stays in order)
  for (int64_t b = lane; b < p.sq_blocks; b += 32) sum = __fadd_rn(sum, __ldcg(p.row_sq + r * p.sq_blocks + b));
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, o));
  return rsqrtf(__fadd_rn(__fdiv_rn(sum, static_cast<float>(p.k)), p.eps));
}

// The q/k/v projection's prologue (rms_norm_qkv_prologue; a.counts set): after warp 0 has stored item
// `block` (16 features of one q, k or v head) for rows row0 .. row0 + RG - 1, it counts the item on its head,
// and the warp that stores a head's last item applies the prologue to that head for each of the rows
// (prologue.cuh; the other items' stores, by other blocks, are visible after the count). scratch:
// kRmsLanes + head_dim floats of shared memory the warp may use.
template <int RG>
__device__ __forceinline__ void prologue_after_item(const PrologueArgs& a, int block, int row0, int64_t rows,
                                                    float* scratch, int lane) {
  const int head = block * kMmaFeatures / a.head_dim;
  __threadfence();  // this lane's stores of the item, before the count (release)
  __syncwarp();
  int last = 0;
  if (lane == 0) {
    last = atomicAdd(&a.counts[head], 1) == a.head_dim / kMmaFeatures - 1;
    if (last) a.counts[head] = 0;  // every item of the head has counted: zero again for the next launch
  }
  if (!__shfl_sync(0xffffffffu, last, 0)) return;
  __threadfence();  // the head's other items, after the count (acquire)
  const int qk_heads = a.n_heads + a.n_kv_heads;
  const void* norm = head < a.n_heads ? a.q_norm : a.k_norm;
  for (int64_t r = row0; r < rows && r < int64_t{row0} + RG; ++r) {
    if (head < qk_heads)
      prologue_qk_head(
          a, head, r, scratch, scratch + kRmsLanes, [&](int i) { return load_as_f32(norm, i, a.norm_dtype); },
          [&](int i) { return a.inv_freq[i]; });
    else
      prologue_v_head(a, head - qk_heads, r);
  }
}

// The w row of row r (0..15) of 16-feature tile `tile` in a tensor-core kernel's stage: pairs (SwiGLU) put 8
// gate rows, then the 8 up rows of the same positions; features past n (pairs: positions past half_n) load a
// valid row that is never stored.
__device__ __forceinline__ int64_t mma_weight_row(const DecodeParams& p, int64_t tile, int r) {
  if (p.act != nullptr) {
    const int64_t position = min(tile * (kMmaFeatures / 2) + (r & 7), p.half_n - 1);
    return r < 8 ? position : p.half_n + position;
  }
  return min(tile * kMmaFeatures + r, p.n - 1);
}

// A tensor-core kernel's ring primed: the weights of its first S - 1 stages (one commit group each) issued
// before the programmatic-dependent-launch wait (they do not depend on the previous kernel), their x after it
// (one group each); `issue` then points at stage S - 1.
template <int S, class Cursor, class Advance, class IssueWeights, class IssueX>
__device__ __forceinline__ void mma_prime_ring(const DecodeParams& p, Cursor& issue, Advance&& advance,
                                               IssueWeights&& issue_weights, IssueX&& issue_x) {
  {
    Cursor c = issue;
    for (int u = 0; u < S - 1; ++u, advance(c)) {
      issue_weights(c, u);
      copy_async_commit();
    }
  }
  trace_stamp(p, 1);
  if (p.early_trigger) pdl_launch_dependents();
  pdl_wait();
  trace_stamp(p, 2);
  for (int u = 0; u < S - 1; ++u, advance(issue)) {
    issue_x(issue, u);
    copy_async_commit();
  }
}

// kPrologue (RG 4 only): the stores also do the attention prologue (pro, with its counts;
// rms_norm_qkv_prologue, one row group). A separate instance, so that the other launches run the kernel
// without that code.
template <int RG, int S, bool kPrologue = false>
__global__ void __launch_bounds__(kMmaWarps * 32) matmul_mma_kernel(const DecodeParams p, const PrologueArgs pro) {
  // One weight tile of 16 rows per warp stage: two or four sharing x were slower (eleventh session).
  constexpr int NT = (RG + 3) / 4;  // n-tiles of 8 B columns: 4 rows each (hi and lo columns; RG 1: one)
  constexpr int kStage = mma_stage_bytes(RG);
  extern __shared__ __align__(128) uint8_t mma_smem[];
  const int lane = threadIdx.x & 31, kw = threadIdx.x >> 5;
  uint8_t* ring = mma_smem + kw * S * kStage;
  float* red = reinterpret_cast<float*>(mma_smem + kMmaWarps * S * kStage);  // [kw - 1][NT · 4][32]
  float* row_scale = red + mma_sum_floats(RG);  // a norm handoff consumer's scale of each row
  // Stages per warp and item; items (< 2^31, checked at launch) and their coordinates in 32 bits, advanced
  // without division in the loop.
  const int steps = static_cast<int>(((p.k + kMmaStepK - 1) / kMmaStepK + kMmaWarps - 1) / kMmaWarps);
  const int row_groups = static_cast<int>(p.row_groups);
  const int items = static_cast<int>(p.row_groups * p.feature_blocks);
  const uint64_t policy = evict_first_policy();
  trace_stamp(p, 0);
  // A position in the block's stream: its item (row group fastest), the item's feature block and first row,
  // and the warp's step within the item.
  struct Cursor {
    int item, block, row0, step;
  };
  auto at_item = [&](int item) {
    const int block = item / row_groups;
    return Cursor{item, block, (item - block * row_groups) * RG, 0};
  };
  auto advance = [&](Cursor& c) {
    if (++c.step == steps) c = at_item(c.item + static_cast<int>(gridDim.x));
  };

  // A stage's weights into ring slot `slot`; nothing past the block's last item. Features past n (pairs:
  // positions past half_n) load a valid row and are never stored; k past the end loads zeros.
  auto issue_weights = [&](const Cursor& c, int slot) {
    if (c.item >= items) return;
    uint8_t* stage = ring + slot * kStage;
    const int64_t k0 = (c.step * kMmaWarps + kw) * kMmaStepK;
#pragma unroll
    for (int j = 0; j < kMmaWBytes / 16 / 32; ++j) {
      const int piece = j * 32 + lane, r = piece >> 3, ch = piece & 7;  // r: row of the 16
      const int64_t row = mma_weight_row(p, c.block, r);
      const int64_t col = k0 + ch * 8;
      const bool valid = col < p.k;
      copy_async_16(stage + mma_swizzle(r, ch), static_cast<const __nv_bfloat16*>(p.w) + row * p.k + (valid ? col : 0),
                    valid, p.evict_first, policy);
    }
  };
  // A stage's 2 · RG split rows of x into ring slot `slot`: rows past `rows` and k past the end are zeros.
  auto issue_x = [&](const Cursor& c, int slot) {
    if (c.item >= items) return;
    uint8_t* xs = ring + slot * kStage + kMmaWBytes;
    const int64_t k0 = (c.step * kMmaWarps + kw) * kMmaStepK;
#pragma unroll
    for (int j = 0; j < (2 * RG * 8 + 31) / 32; ++j) {
      const int piece = j * 32 + lane, r = piece >> 3, ch = piece & 7;
      if (piece >= 2 * RG * 8) break;  // RG 1: 16 pieces
      const int64_t split_row = 2 * int64_t{c.row0} + r, col = k0 + ch * 8;
      const bool valid = split_row < 2 * p.rows && col < p.k;
      copy_async_16(xs + mma_swizzle(r, ch), p.x_split + (valid ? split_row * p.k + col : 0), valid, false, policy);
    }
  };

  Cursor issue = at_item(static_cast<int>(blockIdx.x)), work = issue;
  mma_prime_ring<S>(p, issue, advance, issue_weights, issue_x);
  // Groups so far: weights of stages 0 .. S-2, then their x; each step below adds stage i + S - 1 whole, so
  // with S - 1 groups left pending, stage i has landed.

  // A norm handoff's consumer: every row's scale from the producer's sums of squares (handoff_row_scale),
  // warp w taking rows w, w + 4, ...; read by warp 0 after the item's barrier.
  if (p.row_sq != nullptr) {
    for (int r = kw; r < p.rows; r += kMmaWarps) {
      const float scale = handoff_row_scale(p, r, lane);
      if (lane == 0) row_scale[r] = scale;
    }
  }

  float acc[NT][4];
  auto clear = [&] {
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  };
  clear();
  int issue_slot = S - 1, work_slot = 0;
  bool first = true;
  while (work.item < items) {
    issue_weights(issue, issue_slot);
    issue_x(issue, issue_slot);
    copy_async_commit();
    advance(issue);
    issue_slot = issue_slot + 1 == S ? 0 : issue_slot + 1;
    copy_async_wait_group<S - 1>();
    __syncwarp();
    const uint8_t* stage = ring + work_slot * kStage;
    const uint8_t* xs = stage + kMmaWBytes;
#pragma unroll
    for (int kk = 0; kk < kMmaStepK / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, stage + mma_swizzle((lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)));
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        uint32_t b0, b1;
        const int b_row = RG == 1 ? (lane & 1) : j * 8 + (lane & 7);  // RG 1: columns 2..7 repeat 0 and 1
        ldmatrix_x2(b0, b1, xs + mma_swizzle(b_row, 2 * kk + ((lane >> 3) & 1)));
        mma_bf16_16x8x16(acc[j], a, b0, b1);
      }
    }
    __syncwarp();  // the slot is refilled by this warp's next issue
    work_slot = work_slot + 1 == S ? 0 : work_slot + 1;
    if (first) trace_stamp(p, 3);
    first = false;
    if (work.step != steps - 1) {
      advance(work);
      continue;
    }

    // The item's end: the warps' sums in warp order, stored by warp 0.
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (kw > 0) red[(((kw - 1) * NT + j) * 4 + e) * 32 + lane] = acc[j][e];
    __syncthreads();
    if (kw == 0) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        float* c = acc[j];
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
          for (int q = 1; q < kMmaWarps; ++q) c[e] = __fadd_rn(c[e], red[(((q - 1) * NT + j) * 4 + e) * 32 + lane]);
        mma_store_tile(p, work.block, work.row0 + j * 4, acc[j], row_scale, lane);
      }
      // red is read (above) only by warp 0: free for the prologue's scratch until the barrier below.
      if constexpr (kPrologue) prologue_after_item<RG>(pro, work.block, work.row0, p.rows, red, lane);
    }
    __syncthreads();  // red is written again at the next item's end
    clear();
    if (work.item == static_cast<int>(blockIdx.x)) trace_stamp(p, 4);
    advance(work);
  }
  copy_async_wait_group<0>();  // only empty groups remain; nothing may land after the block exits
  trace_stamp(p, 5);
  if (!p.early_trigger) pdl_launch_dependents();
}

// ---------------------------------------------------------------------------------------------------
// The x-shared tensor-core kernel (Context::mma_x_shared; row groups of 8 and 16): the reduction order of
// matmul_mma_kernel — each output's steps s ≡ kw (mod 4) accumulated in increasing s into accumulator set kw
// by the same MMAs (the same A and B fragments, from +0, zero-filled steps past k included), then
// ((a_0 + a_1) + a_2) + a_3 and mma_store_tile — with the work cut the other way. matmul_mma_kernel gives each
// of a block's four warps every fourth step of one 16-feature tile, so each warp stage carries its own
// copy of x's split (at 16 rows 4 KB of x beside 2 KB of weights: the L2 delivers three bytes for every
// weight byte, and at 32 rows, two row groups, six); here a block of W warps takes W tiles (16 · W features)
// of one row group, each warp one tile through all of its steps, keeping the four accumulator sets itself,
// and a block stage holds one step's weights for the W tiles and one copy of its x (16 rows, W = 4: 8 KB of
// weights and 4 KB of x, 1.5 bytes a weight byte). The block's stages go round one ring (cp.async, one commit
// group a stage, a barrier a stage), the first S - 1 stages' weights issued before the programmatic-
// dependent-launch wait. Items: (W tiles, G row groups), row groups fastest; the grid is persistent over them.
// With G > 1 (Context::mma_x_shared_groups) a block has W · G warps, warp (t, g) taking tile t for row group
// g: one stage's weights serve G row groups, so at 64 rows (G = 4) the weights are streamed once, not four
// times, and each warp's arithmetic is the G = 1 warp's. Tiles past the last feature block load clamped rows
// and store nothing; row groups past the last row load zeros, do no MMAs and store nothing.
template <int RG, int W, int G>
__host__ __device__ constexpr int xs_stage_bytes() { return W * kMmaWBytes + G * 2 * RG * kMmaStepK * 2; }
template <int RG, int W, int G, int S>
constexpr size_t xs_smem_bytes() { return static_cast<size_t>(S) * xs_stage_bytes<RG, W, G>() + kMaxDecodeRows * 4; }

template <int RG, int W, int G, int S>
__global__ void __launch_bounds__(W * G * 32) matmul_mma_xs_kernel(const DecodeParams p) {
  static_assert(RG == 8 || RG == 16, "row groups of 8 or 16");
  static_assert(G == 1 || G == 2 || G == 4, "one, two or four row groups a block");
  constexpr int NT = RG / 4;  // n-tiles of 8 B columns: 4 rows each (hi and lo columns)
  constexpr int kStage = xs_stage_bytes<RG, W, G>();
  constexpr int kThreads = W * G * 32;
  constexpr int kGroupXBytes = 2 * RG * kMmaStepK * 2;  // one row group's split rows in a stage
  extern __shared__ __align__(128) uint8_t xs_smem[];
  float* row_scale = reinterpret_cast<float*>(xs_smem + S * kStage);  // a norm handoff consumer's scales
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int tile_of_warp = warp % W, group_of_warp = warp / W;
  // Steps (64 k each) per item: matmul_mma_kernel's four warps' steps, zero-filled past k included.
  const int steps = static_cast<int>(((p.k + kMmaStepK - 1) / kMmaStepK + kMmaWarps - 1) / kMmaWarps) * kMmaWarps;
  const int row_groups = static_cast<int>((p.row_groups + G - 1) / G);  // of G row groups each
  const int tiles = static_cast<int>(p.feature_blocks);
  const int items = static_cast<int>(row_groups * ((p.feature_blocks + W - 1) / W));
  const uint64_t policy = evict_first_policy();
  trace_stamp(p, 0);
  struct Cursor {
    int item, group, row0, step;
  };
  auto at_item = [&](int item) {
    const int group = item / row_groups;
    return Cursor{item, group, (item - group * row_groups) * RG * G, 0};
  };
  auto advance = [&](Cursor& c) {
    if (++c.step == steps) c = at_item(c.item + static_cast<int>(gridDim.x));
  };

  // A stage's weights (W tiles of 16 rows × 64 k, each tile in matmul_mma_kernel's swizzled layout) into
  // ring slot `slot`, the block's threads taking the 16-byte pieces in turn.
  auto issue_weights = [&](const Cursor& c, int slot) {
    if (c.item >= items) return;
    uint8_t* stage = xs_smem + slot * kStage;
    const int64_t k0 = int64_t{c.step} * kMmaStepK;
#pragma unroll
    for (int j = 0; j < W * 128 / kThreads; ++j) {
      const int piece = j * kThreads + threadIdx.x, t = piece >> 7, r = (piece >> 3) & 15, ch = piece & 7;
      const int64_t row = mma_weight_row(p, int64_t{c.group} * W + t, r);
      const int64_t col = k0 + ch * 8;
      const bool valid = col < p.k;
      copy_async_16(stage + t * kMmaWBytes + mma_swizzle(r, ch),
                    static_cast<const __nv_bfloat16*>(p.w) + row * p.k + (valid ? col : 0), valid, p.evict_first,
                    policy);
    }
  };
  // A stage's 2 · RG · G split rows of x (row group g's at g · kGroupXBytes: the swizzle repeats every 8
  // rows): rows past `rows` and k past the end are zeros.
  auto issue_x = [&](const Cursor& c, int slot) {
    if (c.item >= items) return;
    uint8_t* xs = xs_smem + slot * kStage + W * kMmaWBytes;
    const int64_t k0 = int64_t{c.step} * kMmaStepK;
    for (int piece = threadIdx.x; piece < 2 * RG * G * 8; piece += kThreads) {
      const int r = piece >> 3, ch = piece & 7;
      const int64_t split_row = 2 * int64_t{c.row0} + r, col = k0 + ch * 8;
      const bool valid = split_row < 2 * p.rows && col < p.k;
      copy_async_16(xs + mma_swizzle(r, ch), p.x_split + (valid ? split_row * p.k + col : 0), valid, false, policy);
    }
  };

  Cursor issue = at_item(static_cast<int>(blockIdx.x)), work = issue;
  mma_prime_ring<S>(p, issue, advance, issue_weights, issue_x);
  // Groups so far: the weights of stages 0 .. S-2, then their x (2(S - 1)); each stage below adds one. Before
  // stage i's wait, 2(S - 1) + i are committed and stage i's last is number S - 1 + i: S - 2 may stay pending.

  if (p.row_sq != nullptr) {  // a norm handoff's consumer: every row's scale (visible after the first barrier)
    for (int r = warp; r < p.rows; r += W * G) {
      const float scale = handoff_row_scale(p, r, lane);
      if (lane == 0) row_scale[r] = scale;
    }
  }

  float acc[kMmaWarps][NT][4];
  auto clear = [&] {
#pragma unroll
    for (int q = 0; q < kMmaWarps; ++q)
#pragma unroll
      for (int j = 0; j < NT; ++j) acc[q][j][0] = acc[q][j][1] = acc[q][j][2] = acc[q][j][3] = 0.0f;
  };
  clear();
  int issue_slot = S - 1, work_slot = 0;
  bool first = true;
  while (work.item < items) {
    // Four stages a round, stage kw into accumulator set kw (a register array indexed at compile time).
#pragma unroll
    for (int kw = 0; kw < kMmaWarps; ++kw) {
      copy_async_wait_group<S - 2>();
      __syncthreads();  // stage `work` has landed for every thread, and every warp is done with the slot refilled next
      issue_weights(issue, issue_slot);
      issue_x(issue, issue_slot);
      copy_async_commit();
      advance(issue);
      issue_slot = issue_slot + 1 == S ? 0 : issue_slot + 1;
      const uint8_t* stage = xs_smem + work_slot * kStage;
      const uint8_t* tile = stage + tile_of_warp * kMmaWBytes;
      const uint8_t* xs = stage + W * kMmaWBytes + group_of_warp * kGroupXBytes;
      if (work.row0 + group_of_warp * RG < p.rows) {  // warp-uniform; past the last row x is all zeros
#pragma unroll
        for (int kk = 0; kk < kMmaStepK / 16; ++kk) {
          uint32_t a[4];
          ldmatrix_x4(a, tile + mma_swizzle((lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)));
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            uint32_t b0, b1;
            ldmatrix_x2(b0, b1, xs + mma_swizzle(j * 8 + (lane & 7), 2 * kk + ((lane >> 3) & 1)));
            mma_bf16_16x8x16(acc[kw][j], a, b0, b1);
          }
        }
      }
      work_slot = work_slot + 1 == S ? 0 : work_slot + 1;
      if (first) trace_stamp(p, 3);
      first = false;
      ++work.step;
    }
    if (work.step != steps) continue;

    // The item's end: each warp's tile, its four sets summed in set order, stored.
    const int tile_index = work.group * W + tile_of_warp;
    const int row0 = work.row0 + group_of_warp * RG;
    if (tile_index < tiles && row0 < p.rows) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        float c[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          c[e] = acc[0][j][e];
#pragma unroll
          for (int q = 1; q < kMmaWarps; ++q) c[e] = __fadd_rn(c[e], acc[q][j][e]);
        }
        mma_store_tile(p, tile_index, row0 + j * 4, c, row_scale, lane);
      }
    }
    clear();
    if (work.item == static_cast<int>(blockIdx.x)) trace_stamp(p, 4);
    work = at_item(work.item + static_cast<int>(gridDim.x));
  }
  copy_async_wait_group<0>();  // only empty groups remain; nothing may land after the block exits
  trace_stamp(p, 5);
  if (!p.early_trigger) pdl_launch_dependents();
}

// ---------------------------------------------------------------------------------------------------
// The layer stream: several one-row decode matmuls on the tensor-core order in one persistent launch
// (Context::stream_queue; the matmuls of a decode step between two attentions: o_proj, gate/up, down, the
// next layer's q/k/v). Each kernel-per-op boundary leaves the memory idle for a few microseconds while the
// next kernel's blocks become resident, wait for the previous grid and stage x; here the weight stream
// runs on from one phase into the next, as the sixteenth session's probe did
// (tools/gpu/probe/layer_stream_probe.cu: 0.96 of the copy bandwidth for a layer's four matmuls in one
// launch, against 0.84-0.87 kernel per op). sm_90 (tensor-memory-access copies and mbarriers).
//
// One block per multiprocessor: a producer warp and kStreamGroups groups of kMmaWarps consumer warps. The
// block's whole stream goes through ONE ring of kStreamStageBytes stages (the seventeenth session's
// per-warp rings left the idle warps' share of the shared memory empty when a block had fewer items than
// groups; o_proj and down give a block about two). A stage is one item's 16 weight rows over reps ·
// kStreamStepsK of k (HELIUM_CUDA_STREAM_STAGE_K), landed by one 4D tensor-map copy (or one 3D copy per 64
// of k where the driver refuses the 4D view) in the tensor-core kernel's layout: the 2 KB sub-tiles of
// 64 k one after the other, rows of 128 bytes under the 128-byte swizzle, which is mma_swizzle. The
// producer's lane 0 issues stages and never waits for the activations, only for a free slot (each slot
// has a full and an empty mbarrier; every consumer warp passes every stage, so the parities never alias).
//
// Order of the stages: phase by phase. A phase's items are taken from a grid-wide counter as each block's
// producer goes, at most ceil(items / grid) per block (meant for the blocks that finished a phase 4-11 µs
// apart with fixed shares; it measured no faster than them: docs/benchmarks.md, eighteenth session), one
// current item per group, the groups' stages interleaved step by step; each stage says which phase, group,
// item and step it holds (StageMeta), and a stage of a later phase tells the consumers that the block's
// part of the phase is done. Before a phase the consumers wait for the previous phase's completion on the
// grid (a counter: each block adds one after its stores, release; thread 0 spins with acquire loads) and
// stage x's split for the phase in shared memory: the
// previous phase's split (a norm handoff's, gate/up's activation split) or the split of x itself, which
// each block makes with split_bf16 as split_x_kernel does (no transform; other transforms are not streamed).
//
// The arithmetic is matmul_mma_kernel's, output for output: warp kw of a group takes the steps kw, kw + 4,
// ... of k in increasing order into its MMA accumulators, with the same ldmatrix A fragments and B columns
// (x's hi and lo in columns 0 and 1, zeros in the others, as for a one-row group), the warps' sums in warp
// order, then mma_store_tile. So a row decoded here is bitwise the row the kernel-per-op path (and so any
// batch) computes: batch invariance holds across the two paths; which block computes an item does not
// matter. Rows: one. Weights BF16, k a multiple of reps · kStreamStepsK.
constexpr int kStreamGroups = 4;
constexpr int kStreamWarps = kStreamGroups * kMmaWarps;  // consumer warps
constexpr int kStreamConsumers = kStreamWarps * 32;
constexpr int kStreamThreads = kStreamConsumers + 32;  // and the producer warp
constexpr int kStreamStepsK = kMmaStepK * kMmaWarps;   // k of one stage: one step of every warp of a group
constexpr int kStreamStageBytes = kMmaWarps * kMmaWBytes;
constexpr int kMaxStreamPhases = 8;
constexpr int kMinStreamSlots = 8, kMaxStreamSlots = 24;

struct StreamParams {
  // Per phase, its weights' tensor map: dims {64, rows of a half, halves, k / 64} (pairs: the gate and the up
  // half; otherwise one half of n rows), box {64, 8 or 16, 2 or 1, 4 · reps}; or, where copies[ph] is
  // 4 · reps, the 3D view {k, rows, halves} with box {64, 8 or 16, 2 or 1}, one copy per 64 of k.
  CUtensorMap map[kMaxStreamPhases];  // aligned by its type (64 bytes)
  DecodeParams phase[kMaxStreamPhases];  // x_split null: split phase.x (F32) in each block
  int copies[kMaxStreamPhases];
  int phases;
  int reps;       // k of a stage: reps · kStreamStepsK (every phase's k a multiple of it)
  int slots;      // stages of the ring
  int x_pitch;    // bytes from the hi row to the lo row of the staged x (2 · max k + 16)
  // 2 · kMaxStreamPhases + 2 ints, zero at the first launch: the phases' completion counters and the blocks
  // finished, the launches finished, the phases' next items (all but the launches zeroed again by the last
  // block to finish).
  int* counters;
  bool evict_first;  // weights under the L2 evict_first policy
  // Diagnostic only (HELIUM_CUDA_STREAM_DIAG, Context::stream_diag). 1 (the results are garbage): the
  // warps wait for each stage and multiply nothing (the stream alone). 2: a timeline of launches
  // kStatsFirstLaunch.. (+4) printed by four blocks (phase boundaries, the producer's and a consumer's
  // waits; stream_stats_print).
  int diag;
};

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kStreamConsumers) : "memory"); }
__device__ __forceinline__ void group_sync(int group) {
  asm volatile("bar.sync %0, %1;" ::"r"(2 + group), "n"(kMmaWarps * 32) : "memory");
}

// mbarriers in shared memory (sm_90): init, the producer's arrive with the bytes to expect, the consumers'
// arrive, and a wait for the completion of the phase of parity `parity` (the caller knows the barrier is in
// that phase or past it: a parity names one of two phases).
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_expect(uint64_t* bar, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
#endif
}
// The barriers' initialisation made visible to the tensor-memory copies.
__device__ __forceinline__ void mbar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void tma_prefetch(const CUtensorMap* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
#endif
}
// Stage copies into shared memory through the tensor map, completing on `bar` (bytes counted).
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar, bool hinted, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (hinted)
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(shared_address(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(shared_address(bar)), "l"(policy)
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(shared_address(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(shared_address(bar))
        : "memory");
#endif
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar,
                                            bool hinted, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (hinted)
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(shared_address(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(bar)), "l"(policy)
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(shared_address(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(bar))
        : "memory");
#endif
}

// The consumers' side of a phase boundary (all kStreamConsumers threads; thread 0 is the first consumer):
// wait for the previous phase's completion on the grid, stage x's split (one row: hi, then lo) in shared
// memory and a norm handoff's row scale.
// passed: where thread 0 stamps the counter's release (the diagnostic timeline), or null.
__device__ __forceinline__ void stream_begin_phase(const StreamParams& sp, int ph, uint8_t* xs, float* row_scale,
                                                   uint64_t* passed) {
  const DecodeParams& p = sp.phase[ph];
  const int tid = threadIdx.x;
  if (ph > 0) {
    if (tid == 0)
      while (load_acquire(&sp.counters[ph - 1]) < static_cast<int>(gridDim.x)) {
      }
    consumers_sync();
  }
  if (passed != nullptr && tid == 0) *passed = globaltimer_ns();
  const int k = static_cast<int>(p.k);
  if (p.x_split != nullptr) {
    for (int i = tid * 8; i < k; i += kStreamConsumers * 8) {
      *reinterpret_cast<uint4*>(xs + i * 2) = __ldcg(reinterpret_cast<const uint4*>(p.x_split + i));
      *reinterpret_cast<uint4*>(xs + sp.x_pitch + i * 2) = __ldcg(reinterpret_cast<const uint4*>(p.x_split + k + i));
    }
  } else {  // split_x_kernel's split, no transform
    for (int i = tid * 4; i < k; i += kStreamConsumers * 4) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(p.x + i));
      __align__(8) __nv_bfloat16 hi[4], lo[4];
      split_bf16(v.x, hi[0], lo[0]);
      split_bf16(v.y, hi[1], lo[1]);
      split_bf16(v.z, hi[2], lo[2]);
      split_bf16(v.w, hi[3], lo[3]);
      *reinterpret_cast<uint2*>(xs + i * 2) = *reinterpret_cast<const uint2*>(hi);
      *reinterpret_cast<uint2*>(xs + sp.x_pitch + i * 2) = *reinterpret_cast<const uint2*>(lo);
    }
  }
  if (p.row_sq != nullptr && tid < 32) {
    const float scale = handoff_row_scale(p, 0, tid);
    if (tid == 0) row_scale[0] = scale;
  }
  consumers_sync();
}
// After a phase's stores: the block counts itself done (release).
__device__ __forceinline__ void stream_end_phase(const StreamParams& sp, int ph) {
  consumers_sync();  // every store of the phase is done (and x's stage free for the next)
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(&sp.counters[ph], 1);
  }
}
// The last block past every wait zeroes the counters for the next launch (every producer has taken its last
// item by then) and counts the launch (counters[kMaxStreamPhases + 1], for the diagnostic timeline).
__device__ __forceinline__ void stream_finish(const StreamParams& sp) {
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&sp.counters[kMaxStreamPhases], 1) == static_cast<int>(gridDim.x) - 1) {
      for (int i = 0; i <= kMaxStreamPhases; ++i) sp.counters[i] = 0;
      for (int i = 0; i < kMaxStreamPhases; ++i) sp.counters[kMaxStreamPhases + 2 + i] = 0;
      ++sp.counters[kMaxStreamPhases + 1];
    }
  }
}

// The diagnostic timeline (StreamParams::diag 2): nanoseconds of the global timer.
constexpr int kStatsFirstLaunch = 400;
struct StreamStats {
  uint64_t start, passed[kMaxStreamPhases], begun[kMaxStreamPhases], ended[kMaxStreamPhases];
  uint64_t producer_wait, producer_done, consumer_wait;
};
// One line per block: its start (µs of the global timer modulo 10 s), then per phase (the first four) the
// microseconds from the start to the grid counter's release, the consumption's start and end.
__device__ __forceinline__ void stream_stats_print(const StreamParams& sp, const StreamStats& st, int launch) {
  auto at = [&](uint64_t t) { return t > st.start ? (t - st.start) * 1e-3 : 0.0; };
  printf("stream launch %d block %d start %.2f copies %d reps %d phases %d: [%.2f %.2f %.2f] [%.2f %.2f %.2f] "
         "[%.2f %.2f %.2f] [%.2f %.2f %.2f] producer waited %.2f done %.2f consumer0 waited %.2f end %.2f\n",
         launch, static_cast<int>(blockIdx.x), (st.start % 10000000000ull) * 1e-3, sp.copies[0], sp.reps, sp.phases,
         at(st.passed[0]), at(st.begun[0]), at(st.ended[0]), at(st.passed[1]), at(st.begun[1]), at(st.ended[1]),
         at(st.passed[2]), at(st.begun[2]), at(st.ended[2]), at(st.passed[3]), at(st.begun[3]), at(st.ended[3]),
         st.producer_wait * 1e-3, at(st.producer_done), st.consumer_wait * 1e-3, at(globaltimer_ns()));
}
// The B fragment of x's split for k-step columns at k0 (+ kk · 16): columns 0 (hi) and 1 (lo) in lanes 0..7,
// zeros elsewhere, as matmul_mma_kernel's ldmatrix of a one-row group gives.
__device__ __forceinline__ void stream_x_fragment(const uint8_t* xs, int x_pitch, int k0, int lane, uint32_t& b0,
                                                  uint32_t& b1) {
  b0 = b1 = 0;
  if (lane < 8) {
    const uint8_t* col = xs + (lane >> 2) * x_pitch + (k0 + (lane & 3) * 2) * 2;
    b0 = *reinterpret_cast<const uint32_t*>(col);
    b1 = *reinterpret_cast<const uint32_t*>(col + 16);
  }
}
// A group's item end: the warps' sums in warp order, stored by the group's warp 0 (matmul_mma_kernel's).
__device__ __forceinline__ void stream_store_item(const DecodeParams& p, float (&acc)[4], float* red, int group, int kw,
                                                  int lane, int block, const float* row_scale) {
  float* gred = red + group * kMmaWarps * 4 * 32;
#pragma unroll
  for (int e = 0; e < 4; ++e) gred[(kw * 4 + e) * 32 + lane] = acc[e];
  group_sync(group);
  if (kw == 0) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
#pragma unroll
      for (int q = 1; q < kMmaWarps; ++q) acc[e] = __fadd_rn(acc[e], gred[(q * 4 + e) * 32 + lane]);
    mma_store_tile(p, block, 0, acc, row_scale, lane);
  }
  group_sync(group);
}

// Shared memory of a block: the ring (1024-aligned for the swizzle), x's staged split (two rows of x_pitch),
// the groups' sums, the row scale, the slots' full and empty mbarriers and StageMeta, the timeline.
__host__ __device__ constexpr size_t stream_smem_bytes(int slots, int reps, int x_pitch) {
  return 1024 + static_cast<size_t>(slots) * reps * kStreamStageBytes + 2 * static_cast<size_t>(x_pitch) +
         kStreamWarps * 4 * 32 * 4 + 16 + (2 * 8 + 16) * static_cast<size_t>(slots) + sizeof(StreamStats);
}

// What a stage holds (written by the producer before it arms the stage, read by every consumer warp): its
// phase (sp.phases: the end of the block's stream), the group that multiplies it, the item and the step.
struct StageMeta {
  int phase, group, item, step;
};

__global__ void __launch_bounds__(kStreamThreads, 1) matmul_stream_kernel(const __grid_constant__ StreamParams sp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // never launched before sm_90 (Context::stream_queue is made on sm_90 only); its copies are no-ops there
#endif
  extern __shared__ __align__(1024) uint8_t stream_smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, b = blockIdx.x;
  const int slots = sp.slots, reps = sp.reps, stage_bytes = reps * kStreamStageBytes;
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(stream_smem) + 1023) & ~uintptr_t{1023});
  uint8_t* xs = ring + slots * stage_bytes;
  float* red = reinterpret_cast<float*>(xs + 2 * sp.x_pitch);
  float* row_scale = red + kStreamWarps * 4 * 32;
  uint64_t* full = reinterpret_cast<uint64_t*>(row_scale + 4);
  uint64_t* empty = full + slots;
  StageMeta* meta = reinterpret_cast<StageMeta*>(empty + slots);
  StreamStats* stats = reinterpret_cast<StreamStats*>(meta + slots);
  const bool timed = sp.diag == 2;
  // The stages of an item of phase `phase`.
  auto steps_of = [&](int phase) { return static_cast<int>(sp.phase[phase].k / (kStreamStepsK * reps)); };
  int launch = 0;
  if (threadIdx.x == 0) {
    if (timed) {
      launch = __ldcg(&sp.counters[kMaxStreamPhases + 1]);
      *stats = StreamStats{};
      stats->start = globaltimer_ns();
    }
    for (int s = 0; s < slots; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kStreamWarps);  // every consumer warp passes every stage
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp == kStreamWarps) {  // the producer: lane 0 arms the stages, lanes < copies issue their copies
    if (lane == 0)
      for (int ph = 0; ph < sp.phases; ++ph) tma_prefetch(&sp.map[ph]);
    const uint64_t policy = evict_first_policy();
    uint32_t issued = 0;  // stages so far
    // One stage into the next slot: wait until every consumer warp has passed the slot's previous stage,
    // describe it, arm it with its bytes (none for the end marker) and copy.
    auto put = [&](const StageMeta& m, int row) {
      const int slot = static_cast<int>(issued % slots);
      const uint32_t fill = issued / slots;
      ++issued;
      if (lane == 0) {
        if (fill > 0) {
          const uint64_t t = timed ? globaltimer_ns() : 0;
          mbar_wait(&empty[slot], (fill - 1) & 1);
          if (timed) stats->producer_wait += globaltimer_ns() - t;
        }
        meta[slot] = m;
        if (m.phase < sp.phases) mbar_expect(&full[slot], stage_bytes);
        else mbar_arrive(&full[slot]);
      }
      __syncwarp();
      if (m.phase >= sp.phases) return;
      uint8_t* stage = ring + slot * stage_bytes;
      const int copies = sp.copies[m.phase];
      const int kstep = m.step * reps * kMmaWarps;  // the stage's first 64-element piece of k
      if (copies == 1) {
        if (lane == 0)
          tma_load_4d(stage, &sp.map[m.phase], 0, row, 0, kstep, &full[slot], sp.evict_first, policy);
      } else if (lane < copies) {
        tma_load_3d(stage + lane * kMmaWBytes, &sp.map[m.phase], (kstep + lane) * kMmaStepK, row, 0, &full[slot],
                    sp.evict_first, policy);
      }
    };
    for (int ph = 0; ph < sp.phases; ++ph) {
      const DecodeParams& p = sp.phase[ph];
      const int steps = steps_of(ph);
      const int items = static_cast<int>(p.feature_blocks);
      const int per_item = p.act != nullptr ? kMmaFeatures / 2 : kMmaFeatures;  // rows of a half
      int* next_item = &sp.counters[kMaxStreamPhases + 2 + ph];
      // Items are taken from the phase's grid-wide counter as the block goes, at most ceil(items / grid) of
      // them (without the cap the blocks whose producers ran ahead took every item of a phase of few large
      // ones: down at 1K, 72-138 tok/s; eighteenth session), one current item per group, the groups' stages
      // interleaved step by step. Each group's next item is taken when its current one starts.
      const int cap = (items + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
      int taken = 0;
      auto take = [&] { return taken < cap ? (++taken, atomicAdd(next_item, 1)) : items; };
      int item[kStreamGroups], queued[kStreamGroups], step[kStreamGroups];
      if (lane == 0)
        for (int gr = 0; gr < kStreamGroups; ++gr) item[gr] = take();
      for (int gr = 0; gr < kStreamGroups; ++gr) {
        item[gr] = __shfl_sync(0xffffffffu, item[gr], 0);
        queued[gr] = -1;
        step[gr] = 0;
      }
      for (;;) {
        bool any = false;
#pragma unroll
        for (int gr = 0; gr < kStreamGroups; ++gr) {
          if (item[gr] >= items) continue;
          any = true;
          if (step[gr] == 0 && lane == 0) queued[gr] = take();
          put(StageMeta{ph, gr, item[gr], step[gr]}, item[gr] * per_item);
          if (++step[gr] == steps) {
            item[gr] = __shfl_sync(0xffffffffu, queued[gr], 0);
            step[gr] = 0;
          }
        }
        if (!any) break;
      }
    }
    if (timed && lane == 0) stats->producer_done = globaltimer_ns();
    put(StageMeta{sp.phases, 0, 0, 0}, 0);  // the end of the block's stream
    return;  // the copies complete on the full barriers the consumers wait for
  }

  const int group = warp / kMmaWarps, kw = warp % kMmaWarps;
  pdl_wait();  // the previous kernel's writes (x of the first phase) are visible after this
  int ph = 0;
  stream_begin_phase(sp, 0, xs, row_scale, timed ? &stats->passed[0] : nullptr);
  if (timed && threadIdx.x == 0) stats->begun[0] = globaltimer_ns();
  int steps = steps_of(0);  // stages of an item of phase ph
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t at = 0;; ++at) {
    const int slot = static_cast<int>(at % slots);
    const uint64_t t = timed ? globaltimer_ns() : 0;
    mbar_wait(&full[slot], (at / slots) & 1);
    if (timed && threadIdx.x == 0) stats->consumer_wait += globaltimer_ns() - t;
    const StageMeta m = meta[slot];
    while (ph < m.phase) {  // the block's part of phase ph is done (every group's last item stored)
      if (timed && threadIdx.x == 0) stats->ended[ph] = globaltimer_ns();
      stream_end_phase(sp, ph);
      if (++ph == sp.phases) break;
      stream_begin_phase(sp, ph, xs, row_scale, timed ? &stats->passed[ph] : nullptr);
      if (timed && threadIdx.x == 0) stats->begun[ph] = globaltimer_ns();
      steps = steps_of(ph);
    }
    if (ph == sp.phases) break;
    const bool mine = m.group == group;
    if (mine && sp.diag != 1) {
      for (int j = 0; j < reps; ++j) {  // warp kw's k steps of the stage, in increasing order
        const int kstep = (m.step * reps + j) * kMmaWarps + kw;
        const uint8_t* sub = ring + slot * stage_bytes + (j * kMmaWarps + kw) * kMmaWBytes;
#pragma unroll
        for (int kk = 0; kk < kMmaStepK / 16; ++kk) {
          uint32_t a[4];
          ldmatrix_x4(a, sub + mma_swizzle((lane & 7) + ((lane >> 3) & 1) * 8, 2 * kk + (lane >> 4)));
          uint32_t b0, b1;
          stream_x_fragment(xs, sp.x_pitch, kstep * kMmaStepK + kk * 16, lane, b0, b1);
          mma_bf16_16x8x16(acc, a, b0, b1);
        }
      }
    }
    __syncwarp();  // every lane's reads of the slot are done
    if (lane == 0) mbar_arrive(&empty[slot]);
    if (mine && m.step == steps - 1) {
      stream_store_item(sp.phase[ph], acc, red, group, kw, lane, m.item, row_scale);
      acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    }
  }
  if (timed && threadIdx.x == 0 && launch >= kStatsFirstLaunch && launch < kStatsFirstLaunch + 4 &&
      (b == 0 || b == 1 || b == static_cast<int>(gridDim.x) / 2 || b == static_cast<int>(gridDim.x) - 1))
    stream_stats_print(sp, *stats, launch);
  stream_finish(sp);
}
// ---------------------------------------------------------------------------------------------------
// Prefill helpers.

// Eight f32 values to eight 16-bit ones (round to nearest even): the packing of every prefill staging kernel.
template <class T>
__device__ __forceinline__ uint4 pack8(const float (&v)[8]) {
  uint4 packed;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h[4] = {__floats2bfloat162_rn(v[0], v[1]), __floats2bfloat162_rn(v[2], v[3]),
                                 __floats2bfloat162_rn(v[4], v[5]), __floats2bfloat162_rn(v[6], v[7])};
    memcpy(&packed, h, 16);
  } else {
    const __half2 h[4] = {__floats2half2_rn(v[0], v[1]), __floats2half2_rn(v[2], v[3]), __floats2half2_rn(v[4], v[5]),
                          __floats2half2_rn(v[6], v[7])};
    memcpy(&packed, h, 16);
  }
  return packed;
}

// out = x rounded to nearest even, 8 elements per thread step; count8 = elements / 8 (x and out 16-byte
// aligned).
template <class T>
__global__ void round_x_kernel(const float* x, T* out, int64_t count8) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count8; i += int64_t{gridDim.x} * blockDim.x) {
    const float4 a = reinterpret_cast<const float4*>(x)[2 * i];
    const float4 b = reinterpret_cast<const float4*>(x)[2 * i + 1];
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    reinterpret_cast<uint4*>(out)[i] = pack8<T>(v);
  }
}

// out = silu(gate) · up rounded (silu_mul, then pack8): the SwiGLU of a prefill
// down projection staged for its GEMM in one pass. count8 = elements / 8, all 16-byte aligned.
template <class T>
__global__ void swiglu_round_kernel(const float* gate, const float* up, T* out, int64_t count8) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count8; i += int64_t{gridDim.x} * blockDim.x) {
    float v[8];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 g = reinterpret_cast<const float4*>(gate)[2 * i + h];
      const float4 u = reinterpret_cast<const float4*>(up)[2 * i + h];
      v[4 * h + 0] = silu_mul(g.x, u.x);
      v[4 * h + 1] = silu_mul(g.y, u.y);
      v[4 * h + 2] = silu_mul(g.z, u.z);
      v[4 * h + 3] = silu_mul(g.w, u.w);
    }
    reinterpret_cast<uint4*>(out)[i] = pack8<T>(v);
  }
}

// out = rms_norm(x) rounded, one block of kRmsLanes threads per row (rms_norm's arithmetic, elementwise.cuh).
template <class T>
__global__ void __launch_bounds__(kRmsLanes) rms_norm_round_kernel(const float* x, const void* w, DType w_dtype,
                                                                   int64_t dim, float eps, bool zero_centred, T* out) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  const float* xr = x + blockIdx.x * dim;
  __shared__ float partial[kRmsLanes];
  __shared__ float scale_slot;
  partial[threadIdx.x] = rms_partial(xr, dim, threadIdx.x);
  const float scale = rms_scale_block(partial, dim, eps, &scale_slot);
  for (int64_t i8 = threadIdx.x; i8 < dim / 8; i8 += kRmsLanes) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = rms_apply(xr[i8 * 8 + e], scale, load_as_f32(w, i8 * 8 + e, w_dtype), zero_centred);
    reinterpret_cast<uint4*>(out + blockIdx.x * dim)[i8] = pack8<T>(v);
  }
}

__global__ void add_bias_kernel(float* y, const void* bias, DType bias_dtype, int64_t rows, int64_t n) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  const int64_t total = rows * n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = __fadd_rn(y[i], bias_at(bias, bias_dtype, i % n));
}

// ---------------------------------------------------------------------------------------------------
// Host side.

bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool aligned_16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
int64_t leading_rows(const Tensor& t) {  // product of all but the last dimension (0-safe, unlike rows_of)
  int64_t r = 1;
  for (int i = 0; i + 1 < t.rank; ++i) r *= t.shape[i];
  return r;
}
bool ranges_overlap(const Tensor& a, const Tensor& b) {
  if (a.data == nullptr || b.data == nullptr || a.bytes() == 0 || b.bytes() == 0) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

struct MatmulShape {
  int64_t rows, n, k;
};

// The checks of x, w and bias every matmul entry makes (aborting, naming `op`, on a broken precondition);
// the shape they give (rows, n, k).
MatmulShape check_inputs(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias) {
  HELIUM_CUDA_REQUIRE(op, x.data != nullptr && w.data != nullptr);
  HELIUM_CUDA_REQUIRE(op, x.dtype == DType::F32 && is_float_dtype(w.dtype));
  HELIUM_CUDA_REQUIRE(op, w.rank == 2);
  const int64_t n = w.dim(0), k = w.dim(1);
  HELIUM_CUDA_REQUIRE(op, x.rank >= 1 && x.shape[x.rank - 1] == k);
  const int64_t rows = leading_rows(x);
  if (bias.data != nullptr) HELIUM_CUDA_REQUIRE(op, is_float_dtype(bias.dtype) && bias.rank == 1 && bias.dim(0) == n);
  HELIUM_CUDA_REQUIRE(op, (reinterpret_cast<uintptr_t>(x.data) & 3u) == 0);
  HELIUM_CUDA_REQUIRE(op, (reinterpret_cast<uintptr_t>(w.data) % dtype_bytes(w.dtype)) == 0);
  HELIUM_CUDA_REQUIRE(op, n < (int64_t{1} << 31) && k < (int64_t{1} << 31) && rows < (int64_t{1} << 31));
  return {rows, n, k};
}

// An output y(rows, width) F32 of these inputs: in bounds of nothing it must not overwrite, 4-byte aligned.
void check_output(const char* op, const Tensor& y, int64_t rows, int64_t width, const Tensor& x, const Tensor& w,
                  const Tensor& bias) {
  HELIUM_CUDA_REQUIRE(op, y.data != nullptr && y.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE(op, y.rank >= 1 && y.shape[y.rank - 1] == width && leading_rows(y) == rows);
  HELIUM_CUDA_REQUIRE(op, !ranges_overlap(y, x) && !ranges_overlap(y, w) && !ranges_overlap(y, bias));
  HELIUM_CUDA_REQUIRE(op, (reinterpret_cast<uintptr_t>(y.data) & 3u) == 0);
}

// The entry checks of matmul and matmul_decode: the inputs and the one output y(rows, n).
MatmulShape check_operands(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const MatmulShape shape = check_inputs(op, x, w, bias);
  check_output(op, y, shape.rows, shape.n, x, w, bias);
  return shape;
}

// (features_per_lane, rounds_in_flight) pairs with a kernel instance: 8 to 32 16-byte copies in flight per
// lane, held in the shared-memory ring (16 bytes of it per copy and thread).
struct LaneShape {
  int features_per_lane, rounds_in_flight;
};
constexpr LaneShape kLaneShapes16[] = {{2, 4}, {2, 8}, {2, 16}, {4, 2}, {4, 4}, {4, 8}};  // BF16, F16 w
constexpr LaneShape kLaneShapes32[] = {{2, 2}, {2, 4}, {2, 8}, {4, 1}, {4, 2}, {4, 4}};   // F32 w (2 per chunk)

bool lane_shape_supported(int features_per_lane, int rounds_in_flight, DType w_dtype) {
  const auto match = [&](const auto& table) {
    for (const LaneShape& l : table)
      if (l.features_per_lane == features_per_lane && l.rounds_in_flight == rounds_in_flight) return true;
    return false;
  };
  return w_dtype == DType::F32 ? match(kLaneShapes32) : match(kLaneShapes16);
}

// Shared memory of the decode kernel besides the x tile: kRmsLanes + kMaxRowTile floats, then the ring.
constexpr size_t kFixedSmemBytes = (kRmsLanes + kMaxRowTile) * sizeof(float);
size_t ring_bytes(const MatmulDecodeConfig& cfg, DType w_dtype) {
  if (cfg.mma_stages > 0) return static_cast<size_t>(kMmaWarps) * cfg.mma_stages * kMmaWBytes;  // weights in flight
  const size_t vecs = w_dtype == DType::F32 ? 2 : 1;
  return static_cast<size_t>(cfg.rounds_in_flight) * cfg.features_per_lane * vecs * 16 * 32 * cfg.feature_warps *
         cfg.k_warps;
}
// One round of x for the largest row tile: the smallest x tile any row count needs.
size_t min_x_tile_bytes(const MatmulDecodeConfig& cfg) {
  return static_cast<size_t>(kMaxRowTile) * 32 * cfg.k_warps * kChunk * sizeof(float);
}

// The shared memory a block may opt in to on the current device (227 KB on sm_90, 163 KB on sm_80,
// 99 KB on sm_86/89); without a device, sm_90's figure (host-side listings only: nothing can launch).
size_t smem_optin_limit() {
  int device = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error of a machine without a GPU
    return 227 * 1024;
  }
  return static_cast<size_t>(bytes);
}

// The host work a decode launch needs, done once per (device, kernel, threads, shared memory): the
// kernel's dynamic shared-memory opt-in (raised when a launch needs more) and its resident blocks per
// multiprocessor, which sizes the persistent grid. Done on every launch, these calls cost each of the
// tuner's back-to-back timing launches several microseconds of host time, about as long as a small
// kernel itself (captured graphs paid them once, at capture).
template <class Kernel>
int prepare_decode_kernel(Kernel kernel, int threads, size_t smem) {
  const void* fn = reinterpret_cast<const void*>(kernel);
  struct Key {
    int device;
    const void* kernel;
    int threads;
    size_t smem;
    bool operator<(const Key& o) const {
      return std::tie(device, kernel, threads, smem) < std::tie(o.device, o.kernel, o.threads, o.smem);
    }
  };
  static std::mutex mutex;
  static std::map<Key, int> resident;                               // blocks per multiprocessor
  static std::map<std::pair<int, const void*>, size_t> opted;  // shared memory opted in to
  int device = 0;
  HELIUM_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (smem > kDefaultSmemLimit) {
    size_t& current = opted[{device, fn}];
    if (smem > current) {
      HELIUM_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      current = smem;
    }
  }
  const auto [it, fresh] = resident.try_emplace(Key{device, fn, threads, smem}, 0);
  // All of the unified L1 as shared memory where a block needs more than the default (the decode kernels
  // stream through cp.async rings, bypassing the L1): a hint the driver may otherwise trade for L1 at launch,
  // leaving fewer blocks resident than the occupancy below counts.
  if (fresh && smem > kDefaultSmemLimit)
    HELIUM_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           static_cast<int>(cudaSharedmemCarveoutMaxShared)));
  if (fresh) HELIUM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&it->second, fn, threads, smem));
  return it->second;
}

// Whether a configuration's ring and one round of x for every row tile fit in a block's shared memory.
bool decode_config_fits(const MatmulDecodeConfig& cfg, DType w_dtype, size_t limit) {
  return ring_bytes(cfg, w_dtype) + kFixedSmemBytes + min_x_tile_bytes(cfg) <= limit;
}

int row_tile_for(int64_t rows) { return rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : kMaxRowTile; }

using DecodeKernel = void (*)(DecodeParams);

template <class WT, int RT>
DecodeKernel pick_lane_shape(int features_per_lane, int rounds_in_flight) {
  const int key = features_per_lane * 100 + rounds_in_flight;
  if constexpr (std::is_same_v<WT, float>) {
    switch (key) {
      case 202: return matmul_decode_kernel<WT, RT, 2, 2>;
      case 204: return matmul_decode_kernel<WT, RT, 2, 4>;
      case 208: return matmul_decode_kernel<WT, RT, 2, 8>;
      case 401: return matmul_decode_kernel<WT, RT, 4, 1>;
      case 402: return matmul_decode_kernel<WT, RT, 4, 2>;
      case 404: return matmul_decode_kernel<WT, RT, 4, 4>;
    }
  } else {
    switch (key) {
      case 204: return matmul_decode_kernel<WT, RT, 2, 4>;
      case 208: return matmul_decode_kernel<WT, RT, 2, 8>;
      case 216: return matmul_decode_kernel<WT, RT, 2, 16>;
      case 402: return matmul_decode_kernel<WT, RT, 4, 2>;
      case 404: return matmul_decode_kernel<WT, RT, 4, 4>;
      case 408: return matmul_decode_kernel<WT, RT, 4, 8>;
    }
  }
  return nullptr;
}

template <class WT>
DecodeKernel pick_row_tile(int row_tile, int features_per_lane, int rounds_in_flight) {
  switch (row_tile) {
    case 1: return pick_lane_shape<WT, 1>(features_per_lane, rounds_in_flight);
    case 2: return pick_lane_shape<WT, 2>(features_per_lane, rounds_in_flight);
    case 4: return pick_lane_shape<WT, 4>(features_per_lane, rounds_in_flight);
    case 8: return pick_lane_shape<WT, 8>(features_per_lane, rounds_in_flight);
  }
  return nullptr;
}

DecodeKernel pick_decode_kernel(DType w_dtype, int row_tile, const MatmulDecodeConfig& cfg) {
  switch (w_dtype) {
    case DType::BF16: return pick_row_tile<__nv_bfloat16>(row_tile, cfg.features_per_lane, cfg.rounds_in_flight);
    case DType::F16: return pick_row_tile<__half>(row_tile, cfg.features_per_lane, cfg.rounds_in_flight);
    default: return pick_row_tile<float>(row_tile, cfg.features_per_lane, cfg.rounds_in_flight);
  }
}

bool decode_vector_loads_ok(const Tensor& x, const Tensor& w, int64_t k) {
  return k % kChunk == 0 && aligned_16(x.data) && aligned_16(w.data);
}

int sm_count_of(const Context& c) {
  if (c.sm_count > 0) return c.sm_count;
  int device = 0, sm_count = 0;
  HELIUM_CUDA_CHECK(cudaGetDevice(&device));
  HELIUM_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  return sm_count;
}

// HELIUM_CUDA_MATMUL=fma: BF16 weights on the CUDA-core kernel as before the tensor-core one (an A/B switch
// for benchmarks; it changes results, not their batch invariance). CudaBackend::create refuses other values
// than mma and fma.
bool fma_forced() {
  static const bool forced = [] {
    const char* v = std::getenv("HELIUM_CUDA_MATMUL");
    return v != nullptr && std::string_view(v) == "fma";
  }();
  return forced;
}

// Scratch regions start on 256-byte boundaries.
static_assert(kScratchDecodeRows == kMaxDecodeRows && kHandoffFeatures == kMmaFeatures);  // matmul_scratch.h

bool mma_operands_ok(const Tensor& w, int64_t k) { return w.dtype == DType::BF16 && k % 8 == 0 && aligned_16(w.data); }

// The default configuration of the CUDA-core kernel (see matmul_decode_default_config).
MatmulDecodeConfig fma_default_config(int64_t n, int64_t k, DType w_dtype) {
  MatmulDecodeConfig cfg;
  cfg.k_warps = n >= 4096 ? 1 : n >= 2048 ? 2 : 4;
  while (cfg.k_warps > 1 && k / kChunk < int64_t{64} * cfg.k_warps) cfg.k_warps /= 2;
  cfg.feature_warps = kMaxBlockWarps / cfg.k_warps;
  cfg.features_per_lane = 4;
  const int loads_per_chunk = w_dtype == DType::F32 ? 2 : 1;
  cfg.rounds_in_flight = 16 / (cfg.features_per_lane * loads_per_chunk);
  return cfg;
}

using MmaKernel = void (*)(DecodeParams, PrologueArgs);
template <int RG, bool kPrologue = false>
MmaKernel pick_mma_stages(int stages) {
  switch (stages) {
    case 4: return matmul_mma_kernel<RG, 4, kPrologue>;
    case 6: return matmul_mma_kernel<RG, 6, kPrologue>;
    case 8: return matmul_mma_kernel<RG, 8, kPrologue>;
  }
  return nullptr;
}
// prologue: the instance whose stores do the attention prologue (row groups of 4 only).
MmaKernel pick_mma_kernel(int row_group, int stages, bool prologue) {
  if (prologue) return row_group == 4 ? pick_mma_stages<4, true>(stages) : nullptr;
  switch (row_group) {
    case 1:
      switch (stages) {
        case 6: return matmul_mma_kernel<1, 6>;
        case 7: return matmul_mma_kernel<1, 7>;
        case 8: return matmul_mma_kernel<1, 8>;
        case 10: return matmul_mma_kernel<1, 10>;
        case 12: return matmul_mma_kernel<1, 12>;
        case 16: return matmul_mma_kernel<1, 16>;
      }
      return nullptr;
    case 4: return pick_mma_stages<4>(stages);
    case 8: return pick_mma_stages<8>(stages);
    case 16: return pick_mma_stages<16>(stages);
  }
  return nullptr;
}

// The x-shared kernel's instances: row groups of 8 and 16, 1, 2 or 4 tiles a block, rings of 4 to 16 stages;
// for row groups of 16 also two or four row groups a block, rings of 4 or 8 stages (a stage of 18-24 KB at
// four groups).
using XsKernel = void (*)(DecodeParams);
template <int RG, int W, int G>
XsKernel pick_xs_stages(int stages, size_t& smem) {
  switch (stages) {
    case 4: smem = xs_smem_bytes<RG, W, G, 4>(); return matmul_mma_xs_kernel<RG, W, G, 4>;
    case 8: smem = xs_smem_bytes<RG, W, G, 8>(); return matmul_mma_xs_kernel<RG, W, G, 8>;
  }
  if constexpr (G == 1) {
    switch (stages) {
      case 12: smem = xs_smem_bytes<RG, W, G, 12>(); return matmul_mma_xs_kernel<RG, W, G, 12>;
      case 16: smem = xs_smem_bytes<RG, W, G, 16>(); return matmul_mma_xs_kernel<RG, W, G, 16>;
    }
  }
  return nullptr;
}
// Row groups of 8 take one tile group a block only.
template <int RG, int W>
XsKernel pick_xs_groups(int groups, int stages, size_t& smem) {
  switch (groups) {
    case 1: return pick_xs_stages<RG, W, 1>(stages, smem);
    case 2: if constexpr (RG == 16) return pick_xs_stages<RG, W, 2>(stages, smem); break;
    case 4: if constexpr (RG == 16) return pick_xs_stages<RG, W, 4>(stages, smem); break;
  }
  return nullptr;
}
template <int RG>
XsKernel pick_xs_warps(int warps, int groups, int stages, size_t& smem) {
  switch (warps) {
    case 1: return pick_xs_groups<RG, 1>(groups, stages, smem);
    case 2: return pick_xs_groups<RG, 2>(groups, stages, smem);
    case 4: return pick_xs_groups<RG, 4>(groups, stages, smem);
  }
  return nullptr;
}
XsKernel pick_xs_kernel(int row_group, int warps, int groups, int stages, size_t& smem) {
  switch (row_group) {
    case 8: return pick_xs_warps<8>(warps, groups, stages, smem);
    case 16: return pick_xs_warps<16>(warps, groups, stages, smem);
  }
  return nullptr;
}

// The slots of a layer-stream launch's ring of reps · kStreamStageBytes stages: as many as the shared memory
// holds beside x's staged split, up to kMaxStreamSlots / reps (0 where fewer than kMinStreamSlots / reps, or
// 3, fit).
int stream_slots(int reps, int x_pitch) {
  const size_t limit = smem_optin_limit();
  const int least = std::max(3, kMinStreamSlots / reps);
  int slots = kMaxStreamSlots / reps;
  while (slots >= least && stream_smem_bytes(slots, reps, x_pitch) > limit) --slots;
  return slots >= least ? slots : 0;
}

// The driver's tensor-map encoder, through the runtime (the backend links no libcuda); null if unavailable.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A phase's weight map (StreamParams::map): w's rows as halves of `rows` rows (pairs: gate, then up; else one
// half of n), each row k BF16. The 4D view with k's 64-element pieces as the outer dimension lands a whole
// stage in one copy; if the driver refuses it (its strides do not grow), the 3D view with one copy per 64
// of k. A stage: reps · kStreamStepsK of k. Returns the copies per stage, 0 when neither encodes.
int encode_stream_map(CUtensorMap& map, const void* w, int64_t rows, int halves, int64_t k, int reps) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return 0;
  const cuuint32_t box_rows = static_cast<cuuint32_t>(kMmaFeatures / halves);
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(k) * 2, half_bytes = row_bytes * static_cast<cuuint64_t>(rows);
  const cuuint32_t ones[4] = {1, 1, 1, 1};
  {
    const cuuint64_t dims[4] = {static_cast<cuuint64_t>(kMmaStepK), static_cast<cuuint64_t>(rows),
                                static_cast<cuuint64_t>(halves), static_cast<cuuint64_t>(k / kMmaStepK)};
    const cuuint64_t strides[3] = {row_bytes, half_bytes, static_cast<cuuint64_t>(kMmaStepK) * 2};
    const cuuint32_t box[4] = {static_cast<cuuint32_t>(kMmaStepK), box_rows, static_cast<cuuint32_t>(halves),
                               static_cast<cuuint32_t>(kMmaWarps * reps)};
    if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(w), dims, strides, box, ones,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS)
      return 1;
  }
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(halves)};
  const cuuint64_t strides[2] = {row_bytes, half_bytes};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(kMmaStepK), box_rows, static_cast<cuuint32_t>(halves)};
  if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(w), dims, strides, box, ones,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS)
    return kMmaWarps * reps;
  return 0;
}

}  // namespace

struct StreamQueue {
  StreamParams params{};
  int max_k = 0;
  int64_t phases_sent = 0, launches = 0;
  // Encoded weight maps by (w, rows, halves, k, reps): an eager step queues the same matrices every time.
  struct Encoded {
    CUtensorMap map;
    int copies;
  };
  std::map<std::tuple<const void*, int64_t, int, int64_t, int>, Encoded> maps;
};

StreamQueue* make_stream_queue() { return new StreamQueue(); }
void free_stream_queue(StreamQueue* q) { delete q; }
int stream_counter_count() { return 2 * kMaxStreamPhases + 2; }
void stream_queue_counts(const StreamQueue* q, int64_t& phases, int64_t& launches) {
  phases = q != nullptr ? q->phases_sent : 0;
  launches = q != nullptr ? q->launches : 0;
}

void flush_stream(const Context& c) {
  StreamQueue* q = c.stream_queue;
  if (q == nullptr || q->params.phases == 0) return;
  StreamParams sp = q->params;
  q->params.phases = 0;  // before launch(), which flushes first
  q->max_k = 0;
  q->phases_sent += sp.phases;
  ++q->launches;
  sp.slots = stream_slots(sp.reps, sp.x_pitch);
  HELIUM_CUDA_REQUIRE("matmul", sp.slots > 0);  // checked when the phases were queued
  const size_t smem = stream_smem_bytes(sp.slots, sp.reps, sp.x_pitch);
  {
    static std::mutex mutex;
    static std::map<int, size_t> opted;  // per device
    int device = 0;
    HELIUM_CUDA_CHECK(cudaGetDevice(&device));
    const std::lock_guard<std::mutex> lock(mutex);
    size_t& current = opted[device];
    if (smem > current) {
      HELIUM_CUDA_CHECK(cudaFuncSetAttribute(matmul_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
      current = smem;
    }
  }
  // Every block must be resident at once (they wait for each other): one per multiprocessor.
  launch(c, matmul_stream_kernel, static_cast<unsigned>(sm_count_of(c)), kStreamThreads, smem, sp);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

namespace {

// Queues a one-row tensor-core launch on the layer stream when the context collects them and the phase
// qualifies (BF16 weights 16-byte aligned, k a multiple of kStreamStepsK, x's split given or x to split as
// it is, x's staged split and a minimal ring within the shared memory, its weight map encoded); false
// otherwise, having queued nothing.
bool stream_enqueue(const Context& c, DecodeParams p, const MatmulShape& shape, const __nv_bfloat16* presplit) {
  StreamQueue* q = c.stream_queue;
  const int reps = c.stream_reps;
  if (q == nullptr || !c.stream_enqueue || shape.rows != 1 || shape.k % (kStreamStepsK * reps) != 0 ||
      p.trace != nullptr || !aligned_16(p.w))
    return false;
  if (presplit == nullptr && (p.xform != kNone || !aligned_16(p.x))) return false;
  if (shape.k > (int64_t{1} << 20)) return false;
  if (stream_slots(reps, 2 * static_cast<int>(shape.k) + 16) == 0) return false;
  const bool pairs = p.act != nullptr;
  const int halves = pairs ? 2 : 1;
  const int64_t half_rows = pairs ? p.half_n : shape.n;
  if (half_rows >= (int64_t{1} << 31)) return false;
  auto [it, fresh] = q->maps.try_emplace({p.w, half_rows, halves, shape.k, reps});
  if (fresh) it->second.copies = encode_stream_map(it->second.map, p.w, half_rows, halves, shape.k, reps);
  if (it->second.copies == 0) return false;
  if (q->params.phases == kMaxStreamPhases ||
      stream_slots(reps, 2 * static_cast<int>(std::max<int64_t>(q->max_k, shape.k)) + 16) == 0)
    flush_stream(c);
  p.x_split = presplit;
  p.row_groups = 1;
  p.feature_blocks = (half_rows + kMmaFeatures / halves - 1) / (kMmaFeatures / halves);
  StreamParams& sp = q->params;
  if (p.feature_blocks >= (int64_t{1} << 30)) return false;  // 32-bit item arithmetic in the kernel
  sp.map[sp.phases] = it->second.map;
  sp.copies[sp.phases] = it->second.copies;
  sp.phase[sp.phases++] = p;
  q->max_k = static_cast<int>(std::max<int64_t>(q->max_k, shape.k));
  sp.x_pitch = 2 * q->max_k + 16;
  sp.counters = c.stream_counters;
  sp.evict_first = c.stream_evict_first;
  sp.diag = c.stream_diag;
  sp.reps = reps;
  return true;
}


// The one-row instance's shared memory per block: `need`, padded until no more than Context::mma_one_row_blocks
// blocks fit a multiprocessor, or, with Context::mma_spread, ceil(items / multiprocessors) where that is fewer
// (a launch whose every block has one item: o_proj and down, 256 items; the block scheduler otherwise packs
// them onto as few multiprocessors as hold them, and those stream the launch's tail alone). Residency only:
// the same bits at any size.
int64_t one_row_blocks_per_sm(const Context& c, int64_t items) {
  int64_t per_sm = c.mma_one_row_blocks;
  if (c.mma_spread && c.sm_count > 0) per_sm = std::min<int64_t>(per_sm, (items + c.sm_count - 1) / c.sm_count);
  return per_sm;
}
size_t one_row_block_smem(const Context& c, int64_t items, size_t need) {
  return smem_for_residency(one_row_blocks_per_sm(c, items), need, 1);  // the least size at which per_sm + 1 overflow
}
// A block of a launch of row groups of 4 or more (`need` bytes): padded so that ceil(items / multiprocessors)
// fit a multiprocessor where fewer than `need` would let fit (Context::mma_spread_rows), else `need`.
size_t rows_block_smem(const Context& c, int64_t items, size_t need) {
  if (!c.mma_spread_rows || c.sm_count <= 0) return need;
  const SmemLimits l = smem_limits();
  const int64_t fit = l.per_sm / (static_cast<int64_t>(need) + l.reserved);
  const int64_t spread = (items + c.sm_count - 1) / c.sm_count;
  if (spread >= fit) return need;
  ++c.mma_spread_rows_launches;
  return smem_for_residency(spread, need, 1);
}

// The x-shared kernel's launch (Context::mma_x_shared; x's split already in p.x_split). G row groups a
// block as Context::mma_x_shared_groups says, at most 1, 2 or 4 for a launch of 1, 2 or 3-4 row groups (0:
// that most; G > 1 for row groups of 16 only). W tiles a block as Context::mma_x_shared says, or with -1
// (auto): at G = 1 four where that still gives every multiprocessor an item, else two; past G = 1 the most
// of 4 and 2 that give 95% of them one (o_proj and down at 64 rows: two, 128 items on 132 multiprocessors),
// else one. Its blocks go ceil(items / multiprocessors) to a multiprocessor, and the ring is the deepest of
// 16, 12, 8 and 4 stages (G > 1: 8 and 4) that lets that many fit: a block has (stages - 1) stages in
// flight, and with one or two blocks a multiprocessor four stages left too few bytes in flight (H100, first
// call of the thirtieth session: gate/up 12288 × 4096 at 16 rows, 192 items, 64% of copy against 84% for
// the stacked gate/up's 384). The same bits as matmul_mma_kernel's launch, whatever W, G and the depth.
void launch_mma_x_shared(const Context& c, DecodeParams p, const MatmulShape& shape, int row_group, int64_t tiles,
                         int warps) {
  p.row_groups = (shape.rows + row_group - 1) / row_group;
  p.feature_blocks = tiles;
  int groups = 1;
  if (row_group == 16) {
    const int most = p.row_groups >= 3 ? 4 : static_cast<int>(p.row_groups);  // three: one block's weights, not two
    groups = c.mma_x_shared_groups > 0 ? std::min(c.mma_x_shared_groups, most) : most;
  }
  const int64_t supergroups = (p.row_groups + groups - 1) / groups;
  const int sms = std::max(1, sm_count_of(c));
  if (warps < 0) {
    if (groups == 1) {
      warps = supergroups * ((tiles + 3) / 4) >= sms ? 4 : 2;
    } else {
      warps = 1;
      for (int w : {4, 2})  // 5% of the multiprocessors idle, rather than x's bytes doubled (not yet measured)
        if (supergroups * ((tiles + w - 1) / w) * 20 >= int64_t{sms} * 19) {
          warps = w;
          break;
        }
    }
  }
  const int64_t items = supergroups * ((tiles + warps - 1) / warps);
  HELIUM_CUDA_REQUIRE("matmul", items < (int64_t{1} << 31) - int64_t{1} * 1024 * 1024);  // 32-bit item counters
  const SmemLimits l = smem_limits();
  const int64_t per_sm = std::max<int64_t>(1, (items + sms - 1) / sms);
  XsKernel kernel = nullptr;
  size_t smem = 0;
  const int set_stages = groups > 1 ? std::min(c.mma_x_shared_stages, 8) : c.mma_x_shared_stages;
  for (int stages : {16, 12, 8, 4}) {
    if ((set_stages > 0 && stages != set_stages) || (groups > 1 && stages > 8)) continue;
    kernel = pick_xs_kernel(row_group, warps, groups, stages, smem);
    HELIUM_CUDA_REQUIRE("matmul", kernel != nullptr);
    if (smem <= static_cast<size_t>(l.block_max) &&
        per_sm * (static_cast<int64_t>(smem) + l.reserved) <= int64_t{l.per_sm})
      break;
  }
  HELIUM_CUDA_REQUIRE("matmul", kernel != nullptr);
  if (c.mma_spread_rows) smem = smem_for_residency(per_sm, smem, 1);  // no more than per_sm a multiprocessor
  HELIUM_CUDA_REQUIRE("matmul", smem <= smem_optin_limit());
  const int threads = warps * groups * 32;
  const int fit = prepare_decode_kernel(kernel, threads, smem);
  HELIUM_CUDA_REQUIRE("matmul", fit > 0);
  const int64_t grid = std::min(items, int64_t{fit} * sms);
  ++c.mma_x_shared_launches;
  if (groups > 1) ++c.mma_x_shared_grouped_launches;
  launch(c, kernel, static_cast<unsigned>(grid), threads, smem, p);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

// The start-up tuner's entry for this shape on this device (Context::matmul_decode_table), or null.
const MatmulDecodeShapeConfig* tuned_entry(const Context& c, const MatmulShape& shape, DType w_dtype) {
  if (c.matmul_decode_table != nullptr)
    for (const MatmulDecodeShapeConfig& e : c.matmul_decode_table->entries)
      if (e.n == shape.n && e.k == shape.k && e.w_dtype == w_dtype) return &e;
  return nullptr;
}

// The fewest row groups of 16 from which a launch of this shape takes the x-shared kernel under wide (three:
// more than 32 rows) or tuned (the count the start-up tuner chose for the shape on this GPU; three for a
// shape it has not timed).
int x_shared_from_groups(const Context& c, const MatmulShape& shape) {
  constexpr int kWide = 3;
  if (c.mma_x_shared != Context::kXSharedTuned) return kWide;
  const MatmulDecodeShapeConfig* e = tuned_entry(c, shape, DType::BF16);
  return e != nullptr && e->x_shared_from_groups > 0 ? e->x_shared_from_groups : kWide;
}

// The tensor-core kernel's launch: x's transform split into Context::matmul_scratch (split_x_kernel), then
// the matmul with rows in groups of 4, 8 or 16 (each item streams its weights once for its group), fewer
// stages or smaller groups where the device's shared memory is smaller (speed only).
// presplit: x's split is already there (written by the previous matmul's store), no split kernel.
// prologue: the stores do the attention prologue (rms_norm_qkv_prologue; at most 4 rows), or null.
// after_attention: o_proj after decode attention (presplit its merge's split): one row takes
// Context::oproj_stages' ring where it is set.
void launch_mma(const Context& c, DecodeParams p, const MatmulShape& shape, int stages,
                const __nv_bfloat16* presplit = nullptr, const PrologueArgs* prologue = nullptr,
                bool after_attention = false) {
  if (prologue == nullptr && stream_enqueue(c, p, shape, presplit)) return;
  if (presplit != nullptr) {
    p.x_split = presplit;
  } else {
    HELIUM_CUDA_REQUIRE("matmul", c.matmul_scratch != nullptr && aligned_16(c.matmul_scratch) &&
                                      c.matmul_scratch_bytes >= static_cast<size_t>(shape.rows * shape.k) * 4);
    auto* split = static_cast<__nv_bfloat16*>(c.matmul_scratch);
    const int64_t chunks = (shape.k + kSplitChunk - 1) / kSplitChunk;
    launch(c, split_x_kernel, dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(shape.rows)), kRmsLanes, 0, p,
           split);
    HELIUM_CUDA_CHECK(cudaGetLastError());
    p.x_split = split;
  }
  int row_group = shape.rows <= 4 ? 4 : shape.rows <= 8 ? 8 : kMaxMmaRowGroup;
  const bool pairs = p.act != nullptr;
  const int64_t positions = pairs ? p.half_n : shape.n, per_item = pairs ? kMmaFeatures / 2 : kMmaFeatures;
  // The x-shared kernel: any row group of 8 or 16 at a set tile count, row groups of 16 with auto (at 8 rows
  // the default kernel streamed 84-100% of copy on the large shapes, first call of the thirtieth session),
  // three or four of them with wide, from the shape's tuned count of them with tuned (Context::mma_x_shared).
  const bool x_shared = c.mma_x_shared > 0   ? row_group >= 8
                        : c.mma_x_shared == -1 ? row_group == 16
                        : c.mma_x_shared == c.kXSharedWide || c.mma_x_shared == c.kXSharedTuned
                            ? row_group == kMaxMmaRowGroup &&
                                  (shape.rows + row_group - 1) / row_group >= x_shared_from_groups(c, shape)
                            : false;
  if (prologue == nullptr && x_shared) {
    launch_mma_x_shared(c, p, shape, row_group, (positions + per_item - 1) / per_item,
                        c.mma_x_shared > 0 ? c.mma_x_shared : -1);
    return;
  }
  // One row: the RG 1 instance at Context::mma_one_row_stages (o_proj after attention: oproj_stages), where
  // it fits.
  auto one_row_fits = [](int s) {
    return s > 0 && mma_smem_bytes(1, s) <= smem_optin_limit() && pick_mma_kernel(1, s, false) != nullptr;
  };
  const bool one_row_launch = shape.rows == 1 && prologue == nullptr;
  const bool deep = one_row_launch && after_attention && one_row_fits(c.oproj_stages);
  const int one_row = deep ? c.oproj_stages : c.mma_one_row_stages;
  if (one_row_launch && one_row_fits(one_row)) {
    row_group = 1;
    stages = one_row;
  }
  // The tuner times one row; past 4 rows a stage carries more of x and deeper rings leave fewer blocks per
  // multiprocessor: at 8 rows 4 stages were the fastest or tied for every Qwen3-8B shape (H200: gate/up
  // 30.5 us against 36.1 with 6 and 55.8 with 8, lm_head 351 against 395 and 639; eleventh session).
  if (row_group > 4) stages = std::min(stages, 4);
  const size_t limit = smem_optin_limit();
  while (row_group > 1 && mma_smem_bytes(row_group, stages) > limit && (stages > 4 || row_group > 4)) {
    if (stages > 4) stages = 4;
    else row_group /= 2;
  }
  p.row_groups = (shape.rows + row_group - 1) / row_group;
  p.feature_blocks = (positions + per_item - 1) / per_item;
  const int64_t items = p.row_groups * p.feature_blocks;
  const size_t need = mma_smem_bytes(row_group, stages);
  const size_t smem = deep             ? need
                      : row_group == 1 ? one_row_block_smem(c, items, need)
                                       : rows_block_smem(c, items, need);
  HELIUM_CUDA_REQUIRE("matmul", smem <= limit);
  HELIUM_CUDA_REQUIRE("matmul", items < (int64_t{1} << 31) - int64_t{1} * 1024 * 1024);  // 32-bit item counters
  const MmaKernel kernel = pick_mma_kernel(row_group, stages, prologue != nullptr);
  HELIUM_CUDA_REQUIRE("matmul", kernel != nullptr);
  const int threads = kMmaWarps * 32;
  const int per_sm = prepare_decode_kernel(kernel, threads, smem);
  HELIUM_CUDA_REQUIRE("matmul", per_sm > 0);
  const int64_t grid = std::min(items, int64_t{per_sm} * sm_count_of(c));
  HELIUM_CUDA_REQUIRE("matmul", grid < (int64_t{1} << 31));
  const PrologueArgs pro = prologue != nullptr ? *prologue : PrologueArgs{};
  HELIUM_CUDA_REQUIRE("matmul", pro.counts == nullptr || (row_group == 4 && p.row_groups == 1));
  launch(c, kernel, static_cast<unsigned>(grid), threads, smem, p, pro);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

// ys: the outputs, one (rows, n) tensor or the split ranges of matmul_split (widths summing to n);
// accumulate: add into the one output instead of overwriting it.
// The transform of x a fused call asks for (see XForm); kNone for plain matmuls.
struct XInput {
  XForm xform = kNone;
  Tensor norm_w;
  float eps = 0.0f;
  bool zero_centred = false;
  Tensor up;
};

// act: SwiGLU pairs (DecodeParams::act) into act(rows, n/2) instead of ys (then empty).
// act_split / presplit: the tensor-core kernel's split of act written by a pairs store / read instead of
// splitting x (both null otherwise).
void launch_decode(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys,
                   const MatmulShape& shape, const MatmulDecodeConfig& cfg, bool accumulate = false,
                   const XInput& xin = {}, const Tensor& act = Tensor(), __nv_bfloat16* act_split = nullptr,
                   const __nv_bfloat16* presplit = nullptr, const NormHandoff* next = nullptr,
                   const NormHandoff* pre = nullptr, const PrologueArgs* prologue = nullptr,
                   bool after_attention = false) {
  HELIUM_CUDA_REQUIRE("matmul", matmul_decode_config_valid(cfg, w.dtype));
  const bool handoff = next != nullptr || pre != nullptr;
  if (cfg.mma_stages > 0 && !mma_operands_ok(w, shape.k)) {  // a misaligned weight view: the FMA kernel
    HELIUM_CUDA_REQUIRE("matmul", act_split == nullptr && presplit == nullptr && !handoff && prologue == nullptr);
    launch_decode(c, x, w, bias, ys, shape, fma_default_config(shape.n, shape.k, w.dtype), accumulate, xin, act);
    return;
  }
  HELIUM_CUDA_REQUIRE("matmul", cfg.mma_stages > 0 || (act_split == nullptr && presplit == nullptr && !handoff));
  const bool pairs = act.data != nullptr;
  HELIUM_CUDA_REQUIRE("matmul", pairs ? ys.empty() && !accumulate && shape.n % 2 == 0 && cfg.features_per_lane % 2 == 0
                                      : !ys.empty() && ys.size() <= Backend::kMaxMatmulSplits);
  DecodeParams p{};
  p.x = x.as<float>();
  p.w = w.data;
  p.bias = bias.data;
  p.bias_dtype = bias.dtype;
  p.splits = static_cast<int>(ys.size());
  HELIUM_CUDA_REQUIRE("matmul", !accumulate || ys.size() == 1);
  p.accumulate = accumulate;
  p.xform = xin.xform;
  p.norm_w = xin.norm_w.data;
  p.norm_dtype = xin.norm_w.dtype;
  p.eps = xin.eps;
  p.zero_centred = xin.zero_centred;
  p.up = xin.up.as<float>();
  int64_t end = 0;
  for (size_t i = 0; i < ys.size(); ++i) {
    p.y[i] = ys[i].as<float>();
    end += ys[i].shape[ys[i].rank - 1];
    p.split_end[i] = end;
  }
  HELIUM_CUDA_REQUIRE("matmul", pairs || end == shape.n);
  p.act = pairs ? act.as<float>() : nullptr;
  p.half_n = pairs ? shape.n / 2 : 0;
  p.rows = shape.rows;
  p.n = shape.n;
  p.k = shape.k;
  p.feature_warps = cfg.feature_warps;
  p.k_warps = cfg.k_warps;
  p.evict_first = c.stream_evict_first;
  p.early_trigger = c.matmul_early_trigger;
  p.trace = c.matmul_trace;
  if (cfg.mma_stages > 0) {
    p.evict_first = c.stream_evict_first && c.mma_evict_first;
    p.act_split = act_split;
    if (next != nullptr) {  // the producer of a norm handoff: the residual add, one output
      HELIUM_CUDA_REQUIRE("matmul", !pairs && accumulate && ys.size() == 1 && next->split != nullptr &&
                                        next->sq != nullptr && next->norm_w.numel() == shape.n);
      p.next_split = next->split;
      p.next_sq = next->sq;
      p.next_norm_w = next->norm_w.data;
      p.next_norm_dtype = next->norm_w.dtype;
      p.next_zero_centred = next->zero_centred;
    }
    if (pre != nullptr) {  // its consumer: the producer's split of x · w' instead of a split kernel
      HELIUM_CUDA_REQUIRE("matmul", presplit == nullptr && xin.xform == kRmsNorm && pre->split != nullptr &&
                                        pre->sq != nullptr && pre->norm_w.numel() == shape.k);
      presplit = pre->split;
      p.row_sq = pre->sq;
      p.sq_blocks = (shape.k + kMmaFeatures - 1) / kMmaFeatures;
    }
    launch_mma(c, p, shape, cfg.mma_stages, presplit, prologue, after_attention);
    return;
  }
  HELIUM_CUDA_REQUIRE("matmul", !handoff && prologue == nullptr);

  if (!decode_vector_loads_ok(x, w, shape.k)) {
    HELIUM_CUDA_REQUIRE("matmul", xin.xform == kNone && !pairs);  // fused callers check decode_vector_loads_ok first
    p.row_groups = shape.rows;
    p.tile_rounds = 0;
    const dim3 block(32 * cfg.k_warps);
    for (int64_t r0 = 0; r0 < shape.rows; r0 += 65535) {  // gridDim.y limit
      const dim3 grid(static_cast<unsigned>(shape.n), static_cast<unsigned>(std::min<int64_t>(65535, shape.rows - r0)));
      switch (w.dtype) {
        case DType::BF16: launch(c, matmul_decode_unaligned_kernel<__nv_bfloat16>, grid, block, 0, p, r0); break;
        case DType::F16: launch(c, matmul_decode_unaligned_kernel<__half>, grid, block, 0, p, r0); break;
        default: launch(c, matmul_decode_unaligned_kernel<float>, grid, block, 0, p, r0); break;
      }
      HELIUM_CUDA_CHECK(cudaGetLastError());
    }
    return;
  }

  const int row_tile = row_tile_for(shape.rows);
  const int S = 32 * cfg.k_warps;
  const int64_t nchunks = shape.k / kChunk;
  const int64_t rounds = (nchunks + S - 1) / S;
  const int64_t round_bytes = int64_t{row_tile} * S * kChunk * 4;  // one round of x for the block's rows
  // Tiles of equal size (a whole number of rounds each) within the budget: kXTileBudgetBytes, or what the
  // ring leaves of the device's shared memory.
  const size_t ring = ring_bytes(cfg, w.dtype), limit = smem_optin_limit();
  HELIUM_CUDA_REQUIRE("matmul", decode_config_fits(cfg, w.dtype, limit));
  const int64_t min_tile = c.x_tile_min_bytes > 0 ? c.x_tile_min_bytes : kXTileMinBytes;
  const int64_t wanted = std::min(std::max(kXTileBudgetBytes, min_tile), std::max(min_tile, 4 * round_bytes));
  const int64_t budget = std::min<int64_t>(wanted, static_cast<int64_t>(limit - ring - kFixedSmemBytes));
  const int64_t max_tile_rounds = std::max<int64_t>(1, budget / round_bytes);
  const int64_t tiles = std::max<int64_t>(1, (rounds + max_tile_rounds - 1) / max_tile_rounds);
  p.tile_rounds = static_cast<int>(std::max<int64_t>(1, (rounds + tiles - 1) / tiles));
  p.row_groups = (shape.rows + row_tile - 1) / row_tile;
  const int64_t features_per_block = int64_t{cfg.feature_warps} * cfg.features_per_lane / (pairs ? 2 : 1);
  const int64_t positions = pairs ? p.half_n : shape.n;
  const int64_t feature_blocks = (positions + features_per_block - 1) / features_per_block;
  p.feature_blocks = feature_blocks;
  const int64_t items = p.row_groups * feature_blocks;
  // x tile, then kRmsLanes floats (the k-warp partials need at most kMaxBlockWarps · 32 = kRmsLanes), then
  // the row scales, then the ring.
  static_assert(kMaxBlockWarps * 32 <= kRmsLanes && (kRmsLanes + kMaxRowTile) % 4 == 0);
  const size_t smem = static_cast<size_t>(p.tile_rounds * round_bytes) + kFixedSmemBytes + ring;
  const DecodeKernel kernel = pick_decode_kernel(w.dtype, row_tile, cfg);
  HELIUM_CUDA_REQUIRE("matmul", kernel != nullptr);
  // A persistent grid: as many blocks as fit on the device at once (a multiple of row_groups, so that each
  // block keeps one row group), or fewer when there are fewer items. Which block takes which item changes
  // no arithmetic.
  const int threads = 32 * cfg.feature_warps * cfg.k_warps;
  const int per_sm = prepare_decode_kernel(kernel, threads, smem);
  HELIUM_CUDA_REQUIRE("matmul", per_sm > 0);
  const int64_t resident = int64_t{per_sm} * sm_count_of(c);
  const int64_t grid = std::min(items, std::max(p.row_groups, resident / p.row_groups * p.row_groups));
  HELIUM_CUDA_REQUIRE("matmul", grid < (int64_t{1} << 31));
  launch(c, kernel, static_cast<unsigned>(grid), threads, smem, p);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

// The configuration a decode launch of this shape uses: the tuned one of this device, else the default.
MatmulDecodeConfig decode_config_for(const Context& c, const MatmulShape& shape, DType w_dtype) {
  const MatmulDecodeShapeConfig* e = tuned_entry(c, shape, w_dtype);
  return e != nullptr ? e->config : matmul_decode_default_config(shape.n, shape.k, w_dtype);
}

// ---- cuBLASLt ----

#define HELIUM_LT_CHECK(expr)                                                                              \
  do {                                                                                                     \
    cublasStatus_t helium_st_ = (expr);                                                                    \
    if (helium_st_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "helium: cuda matmul: cuBLASLt error %d at %s:%d: %s\n", static_cast<int>(helium_st_), \
                   __FILE__, __LINE__, #expr);                                                             \
      std::abort();                                                                                        \
    }                                                                                                      \
  } while (0)

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && (a % align) != 0) align >>= 1;
  return align;
}

// y(rows, n) = b(rows, k) · a(n, k)ᵀ [+ bias] in cuBLASLt's column-major terms: D(n × rows) = Aᵀ · B with
// A = w stored (k × n, ld k), B = x stored (k × rows, ld k), D = y stored (n × rows, ld n): the "TN" form,
// k contiguous in both operands. Descriptors live in this object (the *Init calls allocate nothing), so
// it must not be copied.
class LtGemm {
 public:
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  LtGemm() = default;

  // False when cuBLASLt has no algorithm for this problem (then nothing may be run).
  bool plan(const Context& c, cudaDataType_t ab_type, int64_t rows, int64_t n, int64_t k, const void* a, const void* b,
            float* d, const float* bias) {
    HELIUM_LT_CHECK(cublasLtMatmulDescInit(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    HELIUM_LT_CHECK(cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    HELIUM_LT_CHECK(cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    if (bias != nullptr) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;  // f32 bias: the type of D by default
      HELIUM_LT_CHECK(cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
      HELIUM_LT_CHECK(cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    HELIUM_LT_CHECK(cublasLtMatrixLayoutInit(&a_, ab_type, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
    HELIUM_LT_CHECK(cublasLtMatrixLayoutInit(&b_, ab_type, static_cast<uint64_t>(k), static_cast<uint64_t>(rows), k));
    HELIUM_LT_CHECK(cublasLtMatrixLayoutInit(&d_, CUDA_R_32F, static_cast<uint64_t>(n), static_cast<uint64_t>(rows), n));

    cublasLtMatmulPreferenceOpaque_t pref;
    HELIUM_LT_CHECK(cublasLtMatmulPreferenceInit(&pref));
    const uint64_t workspace = c.lt_workspace_bytes;
    HELIUM_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                         sizeof(workspace)));
    // The heuristic otherwise assumes 256-byte aligned operands and may pick kernels that need them.
    const uint32_t align_a = alignment_of(a), align_b = alignment_of(b), align_d = alignment_of(d);
    HELIUM_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                         sizeof(align_a)));
    HELIUM_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                         sizeof(align_b)));
    HELIUM_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                         sizeof(align_d)));
    HELIUM_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                         sizeof(align_d)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(c.lt, &desc_, &a_, &b_, &d_, &d_, &pref, 1, &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) return false;
    algo_ = result.algo;
    return true;
  }

  // d = a·b (+ d when accumulate: beta 1, d read in the epilogue).
  void run(const Context& c, const void* a, const void* b, float* d, bool accumulate = false) {
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    flush_stream(c);  // queued layer-stream phases first (cuBLASLt is not launched through launch())
    HELIUM_LT_CHECK(cublasLtMatmul(c.lt, &desc_, &one, a, &a_, b, &b_, &beta, d, &d_, d, &d_, &algo_, c.lt_workspace,
                                   c.lt_workspace_bytes, c.stream));
  }

 private:
  cublasLtMatmulDescOpaque_t desc_{};
  cublasLtMatrixLayoutOpaque_t a_{}, b_{}, d_{};
  cublasLtMatmulAlgo_t algo_{};
};

// The prefill plan for these operands: which x copy, which type, whether the bias rides in the epilogue.
struct PrefillPlan {
  cudaDataType_t ab_type;
  const void* b;         // x or its rounded copy in matmul_scratch
  bool bias_in_epilogue;
};

// True when the prefill path can run (then `gemm` is planned); false sends the call to the decode kernel.
bool plan_prefill(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                  const MatmulShape& s, LtGemm& gemm, PrefillPlan& plan) {
  if (s.rows <= kMaxDecodeRows || s.k % kChunk != 0 || s.k == 0 || c.lt == nullptr) return false;
  if (!aligned_16(x.data) || !aligned_16(w.data)) return false;
  if (w.dtype == DType::F32) {
    plan.ab_type = CUDA_R_32F;
    plan.b = x.data;
  } else {
    const size_t scratch = static_cast<size_t>(s.rows) * static_cast<size_t>(s.k) * 2;
    HELIUM_CUDA_REQUIRE("matmul", c.matmul_scratch != nullptr && c.matmul_scratch_bytes >= scratch);
    HELIUM_CUDA_REQUIRE("matmul", aligned_16(c.matmul_scratch));
    plan.ab_type = w.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
    plan.b = c.matmul_scratch;
  }
  const bool f32_bias = bias.data != nullptr && bias.dtype == DType::F32;
  plan.bias_in_epilogue = f32_bias && gemm.plan(c, plan.ab_type, s.rows, s.n, s.k, w.data, plan.b, y.as<float>(),
                                                static_cast<const float*>(bias.data));
  if (plan.bias_in_epilogue) return true;
  return gemm.plan(c, plan.ab_type, s.rows, s.n, s.k, w.data, plan.b, y.as<float>(), nullptr);
}

// x (rows, k) rounded to w's 16-bit type into Context::matmul_scratch for cuBLASLt, with the fused
// transform applied on the way (xin: none, RMSNorm — one block per row — or SwiGLU): every prefill GEMM's
// staging.
void stage_prefill_x(const Context& c, const Tensor& x, const XInput& xin, DType w_dtype, int64_t rows, int64_t k) {
  const int sm_count = c.sm_count > 0 ? c.sm_count : 132;
  const int64_t count8 = rows * k / kChunk;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((count8 + 255) / 256, int64_t{sm_count} * 8));
  const bool bf16 = w_dtype == DType::BF16;
  auto* out_b = static_cast<__nv_bfloat16*>(c.matmul_scratch);
  auto* out_h = static_cast<__half*>(c.matmul_scratch);
  if (xin.xform == kRmsNorm) {
    HELIUM_CUDA_REQUIRE("matmul", xin.norm_w.numel() == k);
    const dim3 grid(static_cast<unsigned>(rows));
    if (bf16) launch(c, rms_norm_round_kernel<__nv_bfloat16>, grid, kRmsLanes, 0, x.as<float>(), xin.norm_w.data,
                     xin.norm_w.dtype, k, xin.eps, xin.zero_centred, out_b);
    else launch(c, rms_norm_round_kernel<__half>, grid, kRmsLanes, 0, x.as<float>(), xin.norm_w.data, xin.norm_w.dtype, k,
                xin.eps, xin.zero_centred, out_h);
  } else if (xin.xform == kSwiGLU) {
    if (bf16) launch(c, swiglu_round_kernel<__nv_bfloat16>, blocks, 256, 0, x.as<float>(), xin.up.as<float>(), out_b, count8);
    else launch(c, swiglu_round_kernel<__half>, blocks, 256, 0, x.as<float>(), xin.up.as<float>(), out_h, count8);
  } else {
    if (bf16) launch(c, round_x_kernel<__nv_bfloat16>, blocks, 256, 0, x.as<float>(), out_b, count8);
    else launch(c, round_x_kernel<__half>, blocks, 256, 0, x.as<float>(), out_h, count8);
  }
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

void run_prefill(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                 const MatmulShape& s, LtGemm& gemm, const PrefillPlan& plan) {
  const int sm_count = c.sm_count > 0 ? c.sm_count : 132;
  if (w.dtype != DType::F32) stage_prefill_x(c, x, XInput{}, w.dtype, s.rows, s.k);
  gemm.run(c, w.data, plan.b, y.as<float>());
  if (bias.data != nullptr && !plan.bias_in_epilogue) {
    const int64_t total = s.rows * s.n;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, int64_t{sm_count} * 8));
    launch(c, add_bias_kernel, blocks, 256, 0, y.as<float>(), bias.data, bias.dtype, s.rows, s.n);
    HELIUM_CUDA_CHECK(cudaGetLastError());
  }
}

// Prefill rows of a 16-bit weight with outputs ys (the splits of w's rows, as matmul_split): x staged once
// into matmul_scratch — rounded, with the fused transform applied on the way (RMSNorm or SwiGLU, the
// arithmetic of the unfused kernels) — then one cuBLASLt GEMM per output; accumulate (one output): y +=
// in the GEMM's epilogue (beta 1) instead of a scratch product and an add. Unfused, the same work reads
// and writes x two or three more times (each split rounded x again). Returns false, having enqueued
// nothing, where it does not apply or Context::prefill_fused is off; the caller then runs the unfused
// sequence.
bool prefill_fused(const Context& c, const Tensor& x, const XInput& xin, const Tensor& w, const Tensor& bias,
                   std::span<const Tensor> ys, bool accumulate) {
  const int64_t rows = leading_rows(x);
  if (!c.prefill_fused || rows <= kMaxDecodeRows || w.rank != 2 || (w.dtype != DType::BF16 && w.dtype != DType::F16) || c.lt == nullptr)
    return false;
  const int64_t k = w.dim(1);
  if (k % kChunk != 0 || x.numel() != rows * k || !aligned_16(x.data) || !aligned_16(w.data)) return false;
  if (xin.xform == kSwiGLU && (!aligned_16(xin.up.data) || xin.up.numel() != x.numel())) return false;
  if (accumulate && (ys.size() != 1 || bias.data != nullptr)) return false;
  if (ys.size() > static_cast<size_t>(Backend::kMaxMatmulSplits)) return false;
  const size_t scratch = static_cast<size_t>(rows) * static_cast<size_t>(k) * 2;
  if (c.matmul_scratch == nullptr || c.matmul_scratch_bytes < scratch || !aligned_16(c.matmul_scratch)) return false;
  const cudaDataType_t ab_type = w.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  LtGemm gemms[Backend::kMaxMatmulSplits];
  Tensor views[Backend::kMaxMatmulSplits], biases[Backend::kMaxMatmulSplits];
  int64_t offset = 0;
  for (size_t i = 0; i < ys.size(); ++i) {
    const int64_t width = ys[i].shape[ys[i].rank - 1];
    views[i] = w.rows_from(offset).first_rows(width);
    if (bias.data != nullptr)
      biases[i] = Tensor(static_cast<uint8_t*>(bias.data) + offset * dtype_bytes(bias.dtype), bias.dtype, {width});
    offset += width;
    check_operands("matmul", x, views[i], biases[i], ys[i]);
    if (!aligned_16(views[i].data)) return false;
    const bool f32_bias = biases[i].data != nullptr && biases[i].dtype == DType::F32;
    if (biases[i].data != nullptr && !f32_bias) return false;
    if (!gemms[i].plan(c, ab_type, rows, width, k, views[i].data, c.matmul_scratch, ys[i].as<float>(),
                       f32_bias ? static_cast<const float*>(biases[i].data) : nullptr))
      return false;
  }
  stage_prefill_x(c, x, xin, w.dtype, rows, k);
  for (size_t i = 0; i < ys.size(); ++i) gemms[i].run(c, views[i].data, c.matmul_scratch, ys[i].as<float>(), accumulate);
  return true;
}

}  // namespace

bool operator==(const MatmulDecodeConfig& a, const MatmulDecodeConfig& b) {
  return a.features_per_lane == b.features_per_lane && a.rounds_in_flight == b.rounds_in_flight &&
         a.feature_warps == b.feature_warps && a.k_warps == b.k_warps && a.mma_stages == b.mma_stages;
}

NormHandoff norm_handoff_slot(const Context& c, int64_t rows, int64_t n) {
  NormHandoff h;
  const size_t region = c.matmul_split_region;
  const size_t split_bytes = static_cast<size_t>(rows * n) * 4;
  const size_t sum_bytes = static_cast<size_t>(rows * ((n + kHandoffFeatures - 1) / kHandoffFeatures)) * 4;
  if (c.matmul_scratch == nullptr || region == 0 || rows > kMaxDecodeRows || split_bytes > region ||
      3 * region + sum_bytes > c.matmul_scratch_bytes)
    return h;
  h.split = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(c.matmul_scratch) + 2 * region);
  h.sq = reinterpret_cast<float*>(static_cast<char*>(c.matmul_scratch) + 3 * region);
  return h;
}

__nv_bfloat16* attention_split_slot(const Context& c, int64_t rows, int64_t n) {
  const size_t region = c.matmul_split_region;
  if (c.matmul_scratch == nullptr || region == 0 || rows > kMaxDecodeRows || static_cast<size_t>(rows * n) * 4 > region ||
      !aligned_16(c.matmul_scratch))
    return nullptr;
  return static_cast<__nv_bfloat16*>(c.matmul_scratch);  // region 0: x's split (launch_mma's split_x_kernel)
}

bool matmul_decode_config_valid(const MatmulDecodeConfig& cfg, DType w_dtype) {
  if (cfg.mma_stages != 0)
    return w_dtype == DType::BF16 && (cfg.mma_stages == 4 || cfg.mma_stages == 6 || cfg.mma_stages == 8) &&
           cfg == MatmulDecodeConfig{.mma_stages = cfg.mma_stages};
  const auto pow2_upto = [](int v, int max) { return v >= 1 && v <= max && (v & (v - 1)) == 0; };
  return is_float_dtype(w_dtype) && lane_shape_supported(cfg.features_per_lane, cfg.rounds_in_flight, w_dtype) &&
         pow2_upto(cfg.feature_warps, kMaxBlockWarps) && pow2_upto(cfg.k_warps, kMaxKWarps) &&
         cfg.feature_warps * cfg.k_warps <= kMaxBlockWarps;
}

// The default: blocks of 8 warps (every block stages its rows of x once, so more features per block means
// less x traffic through L2), k split over 2 or 4 warps for small n (while each slice keeps at least 2
// rounds), 4 features per lane and 16 copies of 16 bytes in flight per lane: on the H200 the candidate
// with the most bytes in flight per lane won at one row for every Qwen3-8B shape (helium_bench_cuda_matmul,
// docs/benchmarks.md: 4 x 4 on 8 x 1 warps, e.g. 13.8 us for 4096 x 4096 against 16.7 us at 2 x 4). A
// function of the shape only (no device property): the default order is the same everywhere; the tuner
// (tune.cpp) replaces it with the fastest candidate of this device.
//
// BF16 weights with k % 8 == 0 take the tensor-core kernel (4 stages per warp ring) unless HELIUM_CUDA_MATMUL=fma:
// the FMA kernel's throughput falls with the rows (H200, Qwen3-8B shapes: 31-36% of copy bandwidth at 8
// rows, 4-5% at 64; the tensor-core design at 1 / 8 / 16 / 32 rows 77-100% / 78-97% / 69-92% / 50-68%,
// tenth session's probe), and batched decode and tree verification need the same arithmetic at every row
// count, so the kernel is chosen by the weight, never by the rows.
MatmulDecodeConfig matmul_decode_default_config(int64_t n, int64_t k, DType w_dtype) {
  if (w_dtype == DType::BF16 && k % 8 == 0 && !fma_forced()) return MatmulDecodeConfig{.mma_stages = 4};
  return fma_default_config(n, k, w_dtype);
}

size_t matmul_decode_ring_bytes(const MatmulDecodeConfig& config, DType w_dtype) { return ring_bytes(config, w_dtype); }

std::vector<MatmulDecodeConfig> matmul_decode_candidates(int64_t n, int64_t k, DType w_dtype) {
  std::vector<MatmulDecodeConfig> out;
  const MatmulDecodeConfig fallback = matmul_decode_default_config(n, k, w_dtype);
  out.push_back(fallback);
  const size_t limit = smem_optin_limit();
  if (fallback.mma_stages > 0) {  // the tensor-core kernel: only the ring depth is free (at one row's groups)
    for (int stages : {6, 8})
      if (mma_smem_bytes(4, stages) <= limit) out.push_back(MatmulDecodeConfig{.mma_stages = stages});
    return out;
  }
  const auto& shapes = w_dtype == DType::F32 ? kLaneShapes32 : kLaneShapes16;
  for (const LaneShape& l : shapes)
    for (int k_warps : {1, 2, 4}) {
      if (k_warps > 1 && k / kChunk < int64_t{64} * k_warps) continue;  // fewer than 2 rounds per slice
      for (int feature_warps : {1, 2, 4, 8}) {
        if (feature_warps * k_warps > kMaxBlockWarps || feature_warps * k_warps < 2) continue;
        if (int64_t{feature_warps} * l.features_per_lane > std::max<int64_t>(n, 1) * 2) continue;  // idle warps
        const MatmulDecodeConfig cfg{l.features_per_lane, l.rounds_in_flight, feature_warps, k_warps};
        if (!decode_config_fits(cfg, w_dtype, limit)) continue;  // this device's shared memory
        if (!(cfg == fallback)) out.push_back(cfg);
      }
    }
  return out;
}

void matmul_decode(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                   const MatmulDecodeConfig& config) {
  const MatmulShape shape = check_operands("matmul_decode", x, w, bias, y);
  HELIUM_CUDA_REQUIRE("matmul_decode", matmul_decode_config_valid(config, w.dtype));
  if (shape.rows == 0 || shape.n == 0) return;
  launch_decode(c, x, w, bias, std::span<const Tensor>(&y, 1), shape, config);
}

const char* matmul_path(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const MatmulShape shape = check_operands("matmul_path", x, w, bias, y);
  LtGemm gemm;
  PrefillPlan plan{};
  if (shape.rows > 0 && shape.n > 0 && plan_prefill(c, x, w, bias, y, shape, gemm, plan)) return "cublaslt";
  if (decode_config_for(c, shape, w.dtype).mma_stages > 0 && mma_operands_ok(w, shape.k)) return "decode-mma";
  return decode_vector_loads_ok(x, w, shape.k) ? "decode" : "decode-unaligned";
}

void matmul(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const MatmulShape shape = check_operands("matmul", x, w, bias, y);
  if (shape.rows == 0 || shape.n == 0) return;
  LtGemm gemm;
  PrefillPlan plan{};
  if (plan_prefill(c, x, w, bias, y, shape, gemm, plan)) {
    run_prefill(c, x, w, bias, y, shape, gemm, plan);
    return;
  }
  launch_decode(c, x, w, bias, std::span<const Tensor>(&y, 1), shape, decode_config_for(c, shape, w.dtype));
}

// Decode rows: the residual add happens in the kernel's store (y read, added, written: the bits of a
// separate add); other rows: matmul into scratch, then add.
bool matmul_add(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                const Tensor& y, const NormHandoff* next, const __nv_bfloat16* presplit, bool* took_presplit) {
  if (took_presplit != nullptr) *took_presplit = false;
  const MatmulShape shape = check_operands("matmul_add", x, w, bias, y);
  if (shape.rows == 0 || shape.n == 0) return false;
  if (shape.rows > kMaxDecodeRows || !decode_vector_loads_ok(x, w, shape.k)) {
    if (prefill_fused(c, x, XInput{}, w, bias, std::span<const Tensor>(&y, 1), /*accumulate=*/true))
      return false;
    matmul(c, x, w, bias, scratch);
    add(c, y, scratch, y);
    return false;
  }
  const MatmulDecodeConfig cfg = decode_config_for(c, shape, w.dtype);
  const bool mma = cfg.mma_stages > 0 && mma_operands_ok(w, shape.k);
  const bool handoff = next != nullptr && next->split != nullptr && mma;
  const bool takes_split = mma && presplit != nullptr;  // x is the attention merge's split
  launch_decode(c, x, w, bias, std::span<const Tensor>(&y, 1), shape, cfg, /*accumulate=*/true, {}, Tensor(), nullptr,
                takes_split ? presplit : nullptr, handoff ? next : nullptr, nullptr, nullptr,
                /*after_attention=*/takes_split);
  if (took_presplit != nullptr) *took_presplit = takes_split;
  return handoff;
}

namespace {

// The transform of a fused RMSNorm: rms_norm(x, norm_w, eps, zero_centred) applied as x is staged.
XInput rms_norm_input(const Tensor& norm_w, float eps, bool zero_centred) {
  XInput xin;
  xin.xform = kRmsNorm;
  xin.norm_w = norm_w;
  xin.eps = eps;
  xin.zero_centred = zero_centred;
  return xin;
}

// Whether the decode kernel takes these operands with a fused transform of x (decode rows, vector loads).
bool decode_fusable(const Tensor& x, const Tensor& w) {
  const int64_t rows = leading_rows(x);
  return rows > 0 && rows <= kMaxDecodeRows && w.rank == 2 && decode_vector_loads_ok(x, w, w.dim(1));
}

// The decode launch of matmul_split (one pass over the stacked weight), after the entry checks of each
// output against its slice of w.
void launch_split_decode(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias,
                         std::span<const Tensor> ys, const XInput& xin) {
  const MatmulShape shape = check_inputs("matmul_split", x, w, bias);
  for (const Tensor& y : ys) check_output("matmul_split", y, shape.rows, cols_of(y), x, w, bias);
  launch_decode(c, x, w, bias, ys, shape, decode_config_for(c, shape, w.dtype), false, xin);
}

}  // namespace

// Decode rows: one launch over the stacked weight, each feature stored into its split (the arithmetic of
// a feature is that of matmul() with the stacked weight, so the results are bitwise the same). Prefill
// rows: one cuBLASLt GEMM per split over views of w, bitwise matmul() with that view (cuBLASLt may pick
// another algorithm for another n, so not necessarily the bits of the whole stacked GEMM).
void matmul_split(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys) {
  HELIUM_CUDA_REQUIRE("matmul_split", !ys.empty() && ys.size() <= Backend::kMaxMatmulSplits);
  HELIUM_CUDA_REQUIRE("matmul_split", w.rank == 2);
  const int64_t n = w.dim(0), rows = leading_rows(x);
  int64_t offset = 0;
  for (const Tensor& y : ys) {
    HELIUM_CUDA_REQUIRE("matmul_split", y.rank >= 1 && leading_rows(y) == rows);
    offset += y.shape[y.rank - 1];
  }
  HELIUM_CUDA_REQUIRE("matmul_split", offset == n);
  if (rows == 0 || n == 0) return;
  if (rows > kMaxDecodeRows || !decode_vector_loads_ok(x, w, w.dim(1))) {
    if (prefill_fused(c, x, XInput{}, w, bias, ys, false)) return;
    offset = 0;
    for (const Tensor& y : ys) {
      const int64_t width = y.shape[y.rank - 1];
      Tensor bi;
      if (bias.data != nullptr)
        bi = Tensor(static_cast<uint8_t*>(bias.data) + offset * dtype_bytes(bias.dtype), bias.dtype, {width});
      matmul(c, x, w.rows_from(offset).first_rows(width), bi, y);
      offset += width;
    }
    return;
  }
  launch_split_decode(c, x, w, bias, ys, XInput{});
}

void rms_norm_matmul_split(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                           const Tensor& xn_scratch, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys,
                           const NormHandoff* pre) {
  HELIUM_CUDA_REQUIRE("rms_norm_matmul_split", w.rank == 2 && norm_w.numel() == w.dim(1));
  const XInput xin = rms_norm_input(norm_w, eps, zero_centred);
  if (!decode_fusable(x, w)) {
    if (prefill_fused(c, x, xin, w, bias, ys, false)) return;
    rms_norm(c, x, norm_w, eps, zero_centred, xn_scratch);
    matmul_split(c, xn_scratch, w, bias, ys);
    return;
  }
  if (pre != nullptr && pre->split != nullptr) {
    const MatmulShape shape = check_inputs("rms_norm_matmul_split", x, w, bias);
    const MatmulDecodeConfig cfg = decode_config_for(c, shape, w.dtype);
    if (cfg.mma_stages > 0 && mma_operands_ok(w, shape.k)) {
      for (const Tensor& y : ys) check_output("rms_norm_matmul_split", y, shape.rows, cols_of(y), x, w, bias);
      launch_decode(c, x, w, bias, ys, shape, cfg, false, xin, Tensor(), nullptr, nullptr, nullptr, pre);
      return;
    }
  }
  launch_split_decode(c, x, w, bias, ys, xin);
}

bool rms_norm_qkv_prologue(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                           const Tensor& bias, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, int n_heads, int n_kv_heads, const Tensor& positions,
                           const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots, const Tensor& k_cache,
                           const Tensor& v_cache, const NormHandoff* pre) {
  const char* op = "rms_norm_qkv_prologue";
  if (!c.qkv_prologue || c.prologue_counts == nullptr || !decode_fusable(x, w) || leading_rows(x) > 4) return false;
  const int hd = rope.head_dim;
  // Items of 16 features never straddle a head; the prologue's scratch is the 4-row kernel's 512 floats of
  // sums (kRmsLanes partials and the head).
  if (hd % kMmaFeatures != 0 || kRmsLanes + hd > kMmaWarps * 4 * 32) return false;
  if (n_heads + 2 * n_kv_heads > c.prologue_count_capacity) return false;
  const int64_t q_dim = int64_t{n_heads} * hd, kv_dim = int64_t{n_kv_heads} * hd;
  if (w.rank != 2 || w.dim(0) != q_dim + 2 * kv_dim || norm_w.numel() != w.dim(1)) return false;
  if (cols_of(q) != q_dim || cols_of(k) != kv_dim || cols_of(v) != kv_dim) return false;
  const MatmulShape shape = check_inputs(op, x, w, bias);
  const MatmulDecodeConfig cfg = decode_config_for(c, shape, w.dtype);
  if (cfg.mma_stages == 0 || !mma_operands_ok(w, shape.k)) return false;
  PrologueArgs a = prologue_args(op, q, k, v, q_norm, k_norm, eps, n_heads, n_kv_heads, positions, inv_freq, rope, slots,
                                 k_cache, v_cache);
  HELIUM_CUDA_REQUIRE(op, positions.numel() == shape.rows);
  a.counts = c.prologue_counts;
  const Tensor ys[] = {q, k, v};
  for (const Tensor& y : ys) check_output(op, y, shape.rows, cols_of(y), x, w, bias);
  const XInput xin = rms_norm_input(norm_w, eps, false);
  launch_decode(c, x, w, bias, ys, shape, cfg, false, xin, Tensor(), nullptr, nullptr, nullptr,
                pre != nullptr && pre->split != nullptr ? pre : nullptr, &a);
  return true;
}

bool rms_norm_matmul_swiglu_fusable(const Tensor& x, const Tensor& w) {
  return decode_fusable(x, w) && w.dim(0) % 2 == 0;
}

void rms_norm_matmul_swiglu(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                            const Tensor& w, const Tensor& bias, const Tensor& act) {
  HELIUM_CUDA_REQUIRE("rms_norm_matmul_swiglu", rms_norm_matmul_swiglu_fusable(x, w) && norm_w.numel() == w.dim(1));
  const MatmulShape shape = check_inputs("rms_norm_matmul_swiglu", x, w, bias);
  check_output("rms_norm_matmul_swiglu", act, shape.rows, shape.n / 2, x, w, bias);
  const XInput xin = rms_norm_input(norm_w, eps, zero_centred);
  launch_decode(c, x, w, bias, {}, shape, decode_config_for(c, shape, w.dtype), false, xin, act);  // FT is even
}

bool rms_norm_swiglu_mlp_add(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                             const Tensor& w_gate_up, const Tensor& gate_up_bias, const Tensor& act, const Tensor& w_down,
                             const Tensor& down_bias, const NormHandoff* pre, const NormHandoff* next,
                             bool* wrote_next) {
  if (wrote_next != nullptr) *wrote_next = false;
  if (!rms_norm_matmul_swiglu_fusable(x, w_gate_up) || w_down.rank != 2 || norm_w.numel() != w_gate_up.dim(1)) return false;
  const MatmulShape up_shape = check_inputs("rms_norm_swiglu_mlp_add", x, w_gate_up, gate_up_bias);
  check_output("rms_norm_swiglu_mlp_add", act, up_shape.rows, up_shape.n / 2, x, w_gate_up, gate_up_bias);
  const MatmulShape down_shape = check_operands("rms_norm_swiglu_mlp_add", act, w_down, down_bias, x);
  const MatmulDecodeConfig up_cfg = decode_config_for(c, up_shape, w_gate_up.dtype),
                           down_cfg = decode_config_for(c, down_shape, w_down.dtype);
  if (up_cfg.mma_stages == 0 || down_cfg.mma_stages == 0 || !mma_operands_ok(w_gate_up, up_shape.k) ||
      !mma_operands_ok(w_down, down_shape.k))
    return false;
  // The activation's split after x's split (both in matmul_scratch: matmul_scratch_bytes counts two).
  const size_t offset = round_up_256(static_cast<size_t>(up_shape.rows * up_shape.k) * 4);
  HELIUM_CUDA_REQUIRE("rms_norm_swiglu_mlp_add",
                      c.matmul_scratch != nullptr &&
                          c.matmul_scratch_bytes >= offset + static_cast<size_t>(down_shape.rows * down_shape.k) * 4);
  auto* act_split = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(c.matmul_scratch) + offset);
  launch_decode(c, x, w_gate_up, gate_up_bias, {}, up_shape, up_cfg, false, rms_norm_input(norm_w, eps, zero_centred), act,
                act_split, nullptr, nullptr, pre != nullptr && pre->split != nullptr ? pre : nullptr);
  const bool handoff = next != nullptr && next->split != nullptr;
  launch_decode(c, act, w_down, down_bias, std::span<const Tensor>(&x, 1), down_shape, down_cfg, /*accumulate=*/true, {},
                Tensor(), nullptr, act_split, handoff ? next : nullptr);
  if (wrote_next != nullptr) *wrote_next = handoff;
  return true;
}

void swiglu_matmul_add(const Context& c, const Tensor& gate, const Tensor& up, const Tensor& w, const Tensor& bias,
                       const Tensor& scratch, const Tensor& y) {
  HELIUM_CUDA_REQUIRE("swiglu_matmul_add", up.dtype == DType::F32 && up.numel() == gate.numel());
  XInput xin;
  xin.xform = kSwiGLU;
  xin.up = up;
  if (!decode_fusable(gate, w) || !aligned_16(up.data)) {
    if (prefill_fused(c, gate, xin, w, bias, std::span<const Tensor>(&y, 1), /*accumulate=*/true))
      return;
    swiglu(c, gate, up, gate);
    matmul_add(c, gate, w, bias, scratch, y);
    return;
  }
  const MatmulShape shape = check_operands("swiglu_matmul_add", gate, w, bias, y);
  HELIUM_CUDA_REQUIRE("swiglu_matmul_add", !ranges_overlap(y, up));
  launch_decode(c, gate, w, bias, std::span<const Tensor>(&y, 1), shape, decode_config_for(c, shape, w.dtype),
                /*accumulate=*/true, xin);
}

}  // namespace helium::cuda
