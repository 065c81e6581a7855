// backend/cuda/attention.cu — softmax(q kᵀ · scale) v over each row's paged keys (AttentionLayout in
// backend.h): the op entry (checks), the launchers (which kernel, which grid) and three kernel families.
//
//  - Decode / verify (rows <= kMaxDecodeRows): split-KV. A row's keys are cut into partitions of P
//    logical positions aligned to position 0 ([0, P), [P, 2P), ...), P a function of the row's own key
//    count (attention_partitions.h, Context::attention_tiers: 64 keys up to 2K, 128 up to 4K, 256 up to
//    16K, 512 beyond), so that short contexts still spread over many blocks and long ones keep few
//    partials and few enough blocks for one wave.
//    One block
//    reduces one partition of one row for one GQA group of query heads into (m, l, acc) partials in
//    Context::attention_scratch; a merge kernel then combines a row's partitions in increasing order.
//    Batch and tree invariance (DESIGN.md invariant 2): every sum is taken in an order that depends only on
//    the keys' logical positions and the shapes (head_dim, group size), never on the row count, on the
//    other rows, on the grid size or on the cache slots the values live in. A tree row whose keys are
//    (prefix up to the root) + (ancestors, itself) visits them at positions prefix_len, prefix_len + 1, ...
//    exactly like a linear row at the same position, so both give bitwise the same output.
//  - Prefill (rows > kMaxDecodeRows): FlashAttention-2-style tiles. A block takes 128 consecutive batch
//    rows and one query head, converts Q to bf16, and streams bf16 K/V tiles of the rows' sequence through
//    the block table into shared memory (cp.async, two stages), with mma.sync m16n8k16 (bf16 in, f32
//    accumulate) for q·kᵀ and p·v and an online softmax in f32. Each row masks keys at positions >= its
//    prefix_len (causal for a prompt chunk). Rows of one block that belong to different sequences are
//    handled in runs of consecutive rows sharing a block table: the block streams each run's keys in turn
//    and every row takes part only in its own run. No tree rows here: tree_masks must be empty or all
//    zero (a set bit traps). Which path a row takes depends only on the batch's row count, so a prompt
//    prefilled with the same chunking always gets the same attention outputs (cuda_backend.h).
//  - Generic (any head_dim up to kGenericMaxHeadDim, or tensors not 16-byte aligned): scalar loads, one
//    query head per block, the same partitions; the decode form writes the same partials as the fast
//    kernel. A correctness path for shapes the tuned kernels do not cover.
//
// Rows with no keys (prefix_len 0 and no tree bits) produce zeros. Device-side violations of the layout
// contract (a page id or slot outside the cache, a row's key count above layout.max_keys, a tree bit for
// a row outside the batch) trap: the launch fails loudly instead of reading out of bounds.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cuda/attention_partitions.h"
#include "backend/cuda/cuda_backend.h"  // kMaxDecodeRows
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/mma.cuh"

namespace helium::cuda {
namespace {

using bf16 = __nv_bfloat16;

// Positions per split-KV partition: at most kDecodePartitionKeys (partition_keys, attention_partitions.h;
// the wide ring's blocks hold that many, the short ring's kShortPartitionKeys).
constexpr int kDecodePartitionKeys = kMaxPartitionKeys;
constexpr int kShortPartitionKeys = 128;
// The generic prefill kernel walks a row's keys in pieces of this many.
constexpr int kGenericPrefillKeys = 256;
constexpr int kDecodeThreads = 128;
constexpr int kMergeThreads = 256;
constexpr int kGenericThreads = 128;
constexpr int kGenericMaxHeadDim = 512;
constexpr int kGenericDimsPerThread = kGenericMaxHeadDim / kGenericThreads;

// The q/k prologue done by the decode partition kernel itself (attention_with_prologue): what
// qk_norm_rope_kv_write would read. Each block normalises and rotates its own query heads; a key written
// this step (the step's own rows, AttentionLayout) is computed from k and v by every block that reads it
// instead of being loaded from the cache, and block (part 0, first head pass) of each row writes the row's
// K/V of its KV head into the cache. Everything the prologue reads that is not the projection's output (norm
// weights, the row's rotary angles) is read before the kernel's wait; after it, one batch of asynchronous
// copies brings the block's query heads and its own keys' k and v, and the rest is shared-memory work. With
// `merge`, the last of a (row, head group)'s partition blocks to finish merges the group's partials (a counter
// per group in `counters`, reset by that block).
struct FusedPrologue {
  const float* k = nullptr;  // (rows, n_kv_heads * head_dim) as the projection wrote it
  const float* v = nullptr;  // (rows, n_kv_heads * head_dim)
  void* k_cache = nullptr;   // written at write_slots[row]
  void* v_cache = nullptr;
  const void* q_norm = nullptr;  // (head_dim) or null (then k_norm is null too)
  const void* k_norm = nullptr;
  DType norm_dtype = DType::F32;
  float eps = 0.0f;
  const int32_t* positions = nullptr;  // (rows)
  const float* inv_freq = nullptr;     // (half)
  int half = 0;                        // rot_dim / 2
  float rope_scaling = 1.0f;
  int* counters = nullptr;  // (rows, gridDim.x): partitions finished, zero between launches
  // The most keys a block computes itself (the step's own keys in its partition, and the row's K/V for the
  // block that writes them): rows + 1. Their floats live past DecodeTraits::kOwnOffset in shared memory.
  int own_slots = 0;
  bool merge = false;
  bool early_trigger = false;  // pdl_launch_dependents at the start (else once the K/V are consumed)
};

// Everything the kernels read; built once per call by the op entry.
struct AttentionArgs {
  const float* q;               // (rows, n_heads * head_dim)
  const void* k_cache;          // (cache_slots, n_kv_heads * head_dim), BF16 or F32
  const void* v_cache;          // (cache_slots, n_kv_heads * head_dim), same dtype
  float* out;                   // (rows, n_heads * head_dim)
  const int32_t* block_tables;  // (n_tables, max_pages) page ids
  const int32_t* row_table;     // (rows)
  const int32_t* prefix_lens;   // (rows)
  const int64_t* tree_masks;    // (rows), or nullptr
  const int32_t* write_slots;   // (rows), or nullptr when tree_masks is
  float2* partial_ml;           // (rows, n_heads, n_partitions) {m, l}: decode only
  float* partial_acc;           // (rows, n_heads, n_partitions, head_dim): decode only
  int rows, n_heads, n_kv_heads, head_dim, group;
  float scale;
  int page_size, max_pages, n_tables;
  int64_t cache_slots;
  int max_keys;      // a row with more keys traps (decode: the grid covers max_keys positions)
  int n_partitions;  // decode: partitions per row (gridDim.y of the tuned partition kernel, .x of the generic)
  PartitionTiers tiers;       // partition_keys' thresholds (Context::attention_tiers)
  bool evict_first;           // decode: keys and values loaded with the L2 evict_first policy
  bool early_kv;              // decode: keys this step does not write are loaded before pdl_wait (Context)
  bool no_math;               // diagnostic (HELIUM_CUDA_OMIT=attn_math): decode streams K/V, computes nothing
  bool merge_early_trigger = false;  // decode: the merge lets the next kernel launch before its wait (Context)
  // Decode, the partition kernel without the prologue: lets the merge launch once the block's K/V loads have
  // landed instead of at its start (Context::partition_late_trigger_keys).
  bool partition_late_trigger = false;
  // Decode, the partition kernel without the prologue, launched in clusters of one (row, head group)'s
  // n_partitions blocks: the cluster merges the group's partials itself (merge_in_cluster) and no merge
  // kernel follows (Context::attention_cluster_merge_max).
  bool cluster_merge = false;
  // With cluster_merge and partition_late_trigger: the blocks let o_proj launch only as they exit, after the
  // merge (Context::cluster_merge_trigger_end), not once their K/V loads have landed.
  bool cluster_trigger_end = false;
  // Decode: the merge also writes out's split for o_proj's tensor-core matmul (split_bf16; rows 2r and
  // 2r + 1 of a (2 · rows, n_heads · head_dim) BF16 tensor), or null (attention's out_split).
  __nv_bfloat16* out_split = nullptr;
  L2Prefetch prefetch;        // decode: pulled into the L2 by the partition blocks (for the next op)
  FusedPrologue fused;        // decode with the prologue fused (the kernel's kFused instances) only
  unsigned long long* trace;  // Context::attention_trace, or null
};

// This block's %globaltimer stamp of `event` into Context::attention_trace (thread 0; nothing without one).
__device__ __forceinline__ void attention_stamp(const AttentionArgs& a, int event) {
  if (a.trace != nullptr && threadIdx.x == 0) {
    const int64_t block = blockIdx.x + int64_t{gridDim.x} * (blockIdx.y + int64_t{gridDim.y} * blockIdx.z);
    a.trace[block * kAttentionTraceEvents + event] = globaltimer_ns();
  }
}

// ---------------------------------------------------------------------------------------------------
// Row layout: which cache slot holds the key at each logical position of a row.

__device__ __forceinline__ void require(bool ok) {
  if (!ok) __trap();
}

struct RowKeys {
  const int32_t* table;  // the row's block table
  int n_prefix;          // positions [0, n_prefix) through the table
  uint64_t mask;         // then the batch rows whose bits are set, at write_slots[j]
  int n_keys;            // n_prefix + popcount(mask)
};

__device__ __forceinline__ RowKeys row_keys(const AttentionArgs& a, int row) {
  const int table = a.row_table[row];
  require(table >= 0 && table < a.n_tables);
  const int n_prefix = a.prefix_lens[row];
  require(n_prefix >= 0 && static_cast<int64_t>(n_prefix) <= static_cast<int64_t>(a.max_pages) * a.page_size);
  const uint64_t mask = a.tree_masks != nullptr ? static_cast<uint64_t>(a.tree_masks[row]) : 0;
  require(a.rows >= 64 || (mask >> a.rows) == 0);
  const int n_keys = n_prefix + __popcll(mask);
  require(n_keys <= a.max_keys);
  return {a.block_tables + static_cast<int64_t>(table) * a.max_pages, n_prefix, mask, n_keys};
}

// Cache slot of the key at logical position `i` < n_keys of a row. With `writer`, also the batch row that
// writes that slot in this step (-1: an earlier step wrote it): a tree key's own row, or, for a prefix key
// among the last `rows` positions (the only ones a step writes, AttentionLayout), the row whose write slot
// it is.
__device__ __forceinline__ int64_t key_slot(const AttentionArgs& a, const RowKeys& r, int i, int* writer = nullptr) {
  int64_t slot;
  if (i < r.n_prefix) {
    const int page = r.table[i / a.page_size];
    slot = static_cast<int64_t>(page) * a.page_size + i % a.page_size;
    if (writer != nullptr) {
      *writer = -1;
      if (i >= r.n_prefix - a.rows)
        for (int j = 0; j < a.rows; ++j)
          if (a.write_slots[j] == slot) {
            *writer = j;
            break;
          }
    }
  } else {
    uint64_t m = r.mask;  // the (i - n_prefix)-th set bit, counting from the lowest
    for (int k = i - r.n_prefix; k > 0; --k) m &= m - 1;
    const int j = __ffsll(static_cast<long long>(m)) - 1;
    slot = a.write_slots[j];
    if (writer != nullptr) *writer = j;
  }
  require(slot >= 0 && slot < a.cache_slots);
  return slot;
}

// ---------------------------------------------------------------------------------------------------
// Small device helpers: cache element conversion, cp.async, ldmatrix, mma.

template <typename T>
struct CacheElem;
template <>
struct CacheElem<bf16> {
  static constexpr int kPer16Bytes = 8;
  __device__ static float load(const bf16* p) { return __bfloat162float(*p); }
  __device__ static void unpack(const uint4& raw, float* f) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
};
template <>
struct CacheElem<float> {
  static constexpr int kPer16Bytes = 4;
  __device__ static float load(const float* p) { return *p; }
  __device__ static void unpack(const uint4& raw, float* f) {
    f[0] = __uint_as_float(raw.x);
    f[1] = __uint_as_float(raw.y);
    f[2] = __uint_as_float(raw.z);
    f[3] = __uint_as_float(raw.w);
  }
};


// 16 bytes global -> shared, asynchronously; with valid == false the destination is zero-filled and
// nothing is read.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
// The same under an L2 policy (evict_first_policy): keys and values read once per step.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 16 : 0), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p))
               : "memory");
}


// Sums kValues values over the kWidth lanes of an aligned lane group (kWidth a power of two, <= 32),
// halving the values at each step: at offset o, the lane whose bit o is set keeps the upper half and
// sends the lower half to its partner, which keeps the lower half. When kValues >= kWidth, lane k of the
// group ends with the totals of values [k * kValues / kWidth, (k + 1) * kValues / kWidth) in
// x[0 .. kValues / kWidth); otherwise value v ends (in x[0]) in the kWidth / kValues lanes
// v * kWidth / kValues, ... (each holding the same total). log2(kWidth) shuffles per value pair instead of
// per value; the order of every sum depends only on the lane numbers.
template <int kOffset, int kValues, int kN>
__device__ __forceinline__ void transpose_reduce(float (&x)[kN], int lane_in_group) {
  if constexpr (kOffset >= 1) {
    if constexpr (kValues > 1) {
      const bool upper = (lane_in_group & kOffset) != 0;
#pragma unroll
      for (int i = 0; i < kValues / 2; ++i) {
        const float send = upper ? x[i] : x[i + kValues / 2];
        const float keep = upper ? x[i + kValues / 2] : x[i];
        x[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
      }
      transpose_reduce<kOffset / 2, kValues / 2>(x, lane_in_group);
    } else {
      x[0] += __shfl_xor_sync(0xffffffffu, x[0], kOffset);
      transpose_reduce<kOffset / 2, 1>(x, lane_in_group);
    }
  }
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Butterfly sum: every lane ends with the same value (a + b == b + a in floating point).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---------------------------------------------------------------------------------------------------
// Decode partition kernel (tuned): one block = one partition x one row x kGroup query heads of one kv head.
//
// Thread layout: a key's head vector (head_dim elements) is split over kLanesPerKey lanes, each owning
// kElems elements in kLoads 16-byte pieces interleaved across the lanes (piece v of lane k = piece
// v * kLanesPerKey + k of the vector, so a warp reads contiguous bytes). The block's kKeySlots lane groups
// take keys slot, slot + kKeySlots, ... of each chunk. K and V of the partition stream through a cp.async
// ring of kStages chunks (all K chunks, then all V chunks), so up to kStages stages per block are in
// flight however few registers the compute needs (the short or the wide ring: Ring, launch_decode_partition).
//
// Sums, all fixed by (head_dim, kGroup, dtype) and the key's position in the partition — not by the ring:
//   score: each lane's kElems products in element order, then transpose_reduce over the key's lanes (the
//   same tree of lane offsets whatever the number of values reduced at once, kStepKeys * kGroup);
//   max / exp / l: per head, lane i of a warp takes keys i, i + 32, ... in order, then a butterfly;
//   acc: each lane group sums its keys in increasing position (the keys ≡ its slot mod kKeySlots, for any
//   chunk of a multiple of kKeySlots keys), then the kKeySlots groups are summed in group order through
//   shared memory.
//
// kFused (attention_with_prologue, FusedPrologue): the block also does the q/k prologue's work that it
// needs — its query heads normalised and rotated into shared memory, the keys this step writes computed
// from the projection's k and v where the ring would have loaded them (with the prologue's arithmetic,
// elementwise.cuh, rounded to the cache's dtype: the bits the cache gets) — and block (part 0, first pass)
// writes the row's K/V; with FusedPrologue::merge the last partition block of the group merges
// (merge_in_block). Every sum above is unchanged.
// The decode kernel's two K/V rings, both of 8 KB stages and four blocks per multiprocessor (sm_90). Short:
// partitions of up to 128 keys (rows up to PartitionTiers::medium_end) and five stages (about 43 KB of
// shared memory a block for a GQA group of 4: a 1K row's 64-key partitions are issued whole before the
// wait). Wide: partitions of up to 512 keys and as many stages as fit in kWideBlockBytes. The ring changes
// how K/V are staged and how much shared memory a block holds, never an output's arithmetic (none of the
// sums above depends on the chunk size). H200, Qwen3-8B shape (docs/benchmarks.md, fifteenth session):
// these 8 KB rings beat the 16 KB ones they replace (four stages, three blocks per multiprocessor up to
// 256-key partitions; three stages, four blocks for larger grids).
enum class Ring { kShort, kWide };
constexpr size_t kWideBlockBytes = 56 << 10;  // (228 KB of an sm_90 multiprocessor) / 4 - 1 KB reserved per block
constexpr int ring_partition_keys(Ring ring) { return ring == Ring::kWide ? kDecodePartitionKeys : kShortPartitionKeys; }

// Resident blocks per multiprocessor (sm_90), either ring. The kernel's launch bounds, the launcher's wave
// counts and the spread (decode_block_smem) use it.
constexpr int kDecodeBlocksPerSm = 4;

template <typename T, int kHeadDim, int kGroup, Ring kRing, bool kFused = false>
struct DecodeTraits {
  static constexpr bool kWide = kRing == Ring::kWide;
  static constexpr int kPartKeys = ring_partition_keys(kRing);  // the longest partition
  static constexpr int kStageBytes = 8 << 10;                     // one ring stage
  static constexpr int kElems = kGroup == 8 ? 8 : 16;  // cache elements per lane per key
  static constexpr int kVec = CacheElem<T>::kPer16Bytes;
  static constexpr int kLoads = kElems / kVec;
  static constexpr int kLanesPerKey = kHeadDim / kElems;
  static constexpr int kKeySlots = kDecodeThreads / kLanesPerKey;
  static constexpr int kRowBytes = kHeadDim * static_cast<int>(sizeof(T));
  static constexpr int kChunkKeys = std::min(kPartKeys, kStageBytes / kRowBytes);
  // Keys per lane group per reduction step: bounded so that kStepKeys * kGroup partial scores fit in
  // registers beside the kGroup * kElems query values.
  static constexpr int kStepKeys = std::max(1, std::min(kChunkKeys / kKeySlots, 32 / kGroup));
  static constexpr int kSteps = kChunkKeys / (kKeySlots * kStepKeys);
  static constexpr int kPiecesPerKey = kRowBytes / 16;
  static constexpr int kPiecesPerChunk = kChunkKeys * kPiecesPerKey;

  // kFused stages the block's queries (kGroup * kHeadDim floats) in the score area before any score.
  static constexpr size_t kScoreBytes = std::max(size_t{kPartKeys} * kGroup, kFused ? size_t{kGroup} * kHeadDim : 0) * 4;
  static constexpr size_t kSlotBytes = size_t{kPartKeys} * 8;
  static constexpr size_t kMlBytes = 2 * kGroup * 4;
  // kFused: the writer row of each of the block's own keys (kMaxDecodeRows + 1 at most), their count, the
  // slot of the row's K/V, the merge flag.
  static constexpr size_t kFusedBytes = kFused ? size_t{kMaxDecodeRows + 4} * 4 : 0;
  static constexpr size_t kFixedBytes = kScoreBytes + kSlotBytes + kMlBytes + kFusedBytes;
  static constexpr int kStages =
      kWide ? std::min<int>(6, static_cast<int>((kWideBlockBytes - kFixedBytes) / kStageBytes)) : 5;
  static constexpr size_t kRingBytes = size_t{kStages} * kStageBytes;
  static constexpr size_t kSmemBytes = kRingBytes + kFixedBytes;
  // kFused: the own keys' floats (fused_own_bytes) from here, 16-byte aligned for the copies that fill them.
  static constexpr size_t kOwnOffset = (kSmemBytes + 15) / 16 * 16;
  // The lane groups' accumulators (s_red, in the drained ring), and after them the block's partition
  // accumulators when its cluster merges (s_pacc, merge_in_cluster): whether both fit the ring.
  static constexpr size_t kRedBytes = size_t{kKeySlots} * kGroup * kHeadDim * 4;
  static constexpr bool kClusterMergeFits = !kFused && kRedBytes + size_t{kGroup} * kHeadDim * 4 <= kRingBytes &&
                                            kScoreBytes >= size_t{33} * kGroup * 4;

  static_assert(kHeadDim % kElems == 0 && kElems % kVec == 0);
  static_assert(kLanesPerKey >= 1 && kLanesPerKey <= 32 && (kLanesPerKey & (kLanesPerKey - 1)) == 0);
  static_assert(kPartKeys % kChunkKeys == 0 && kChunkKeys % (kKeySlots * kStepKeys) == 0);
  static_assert(kPiecesPerChunk % kDecodeThreads == 0);
  static_assert(kStages >= 4 && kSmemBytes <= kWideBlockBytes);
  static_assert(kKeySlots * kGroup * kHeadDim * 4 <= kRingBytes);  // s_red, the lane groups' accumulators
};

// The most partitions merge_in_block takes on a ring: its (m, l) pairs live in the score area.
constexpr int fused_merge_max_partitions(Ring ring) { return ring_partition_keys(ring) / 2; }

// The merge of one (row, head group)'s partitions by the block that finished last, with exactly the
// arithmetic of attention_decode_merge (the same weights, slices and orders, so the same bits): the
// group's (m, l) pairs into the score area, then its partials through the (drained) ring a chunk of
// partitions at a time, each thread summing kMergePerThread (head, slice, 4 dims) items, then the slice
// sums in slice order. Not inlined, its arguments by value: inlined, its accumulators added to the
// partition kernel's register pressure (spills in the 3-stage instances).
template <typename Tr, int kHeadDim, int kGroup>
__device__ __noinline__ void merge_in_block(const float2* partial_ml, const float* partial_acc, float* out_rows,
                                            int n_heads, int n_partitions, int row, int head0, int parts,
                                            uint8_t* smem, float* s_score, float* s_inv) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // attention_decode_merge's slices (its kVec is 4 for every tuned head_dim).
  static_assert(kHeadDim % 4 == 0);
  constexpr int kVecs = kHeadDim / 4;
  constexpr int kSlices = kVecs >= kMergeThreads ? 1 : kMergeThreads / kVecs;
  constexpr int kItems = kGroup * kSlices * kVecs;  // (head, slice, 4 dims)
  constexpr int kPerThread = (kItems + kDecodeThreads - 1) / kDecodeThreads;
  static_assert(size_t{kGroup} * kSlices * kHeadDim * 4 <= Tr::kRingBytes);  // the slice sums
  const int64_t base = (static_cast<int64_t>(row) * n_heads + head0) * n_partitions;  // head g: + g * n_partitions
  float* s_w = s_score;                  // [kGroup][parts] m_p, then w_p
  float* s_lp = s_score + kGroup * parts;  // [kGroup][parts] l_p
  for (int i = tid; i < kGroup * parts; i += kDecodeThreads) {
    const int g = i / parts, p = i % parts;
    const float2 ml = __ldcg(partial_ml + base + static_cast<int64_t>(g) * n_partitions + p);
    s_w[i] = ml.x;
    s_lp[i] = ml.y;
  }
  __syncthreads();
  for (int g = warp; g < kGroup; g += kDecodeThreads / 32) {
    float m = -INFINITY;  // a max: exact in any order
    for (int p = lane; p < parts; p += 32) m = fmaxf(m, s_w[g * parts + p]);
    m = warp_max(m);
    for (int p = lane; p < parts; p += 32) s_w[g * parts + p] = expf(s_w[g * parts + p] - m);
    __syncwarp();
    if (lane == 0) {
      float l = 0.0f;
      for (int p = 0; p < parts; ++p) l = __fmaf_rn(s_lp[g * parts + p], s_w[g * parts + p], l);
      s_inv[g] = 1.0f / l;
    }
  }
  __syncthreads();

  float sum[kPerThread][4];
#pragma unroll
  for (int r = 0; r < kPerThread; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) sum[r][e] = 0.0f;
  float* stage = reinterpret_cast<float*>(smem);  // [kGroup][chunk partitions][kHeadDim]
  const int chunk = static_cast<int>(Tr::kRingBytes / (size_t{kGroup} * kHeadDim * 4));
  for (int pc = 0; pc < parts; pc += chunk) {
    const int cn = min(chunk, parts - pc);
    for (int i = tid; i < kGroup * cn * kVecs; i += kDecodeThreads) {
      const int g = i / (cn * kVecs), pp = (i / kVecs) % cn, v = i % kVecs;
      cp_async_16(stage + (g * cn + pp) * kHeadDim + v * 4,
                  partial_acc + (base + static_cast<int64_t>(g) * n_partitions + pc + pp) * kHeadDim + v * 4, true);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int it = tid + r * kDecodeThreads;
      if (it >= kItems) break;
      const int g = it / (kSlices * kVecs), sl = (it / kVecs) % kSlices, v = it % kVecs;
      // This slice's partitions in the chunk, in increasing order: p ≡ sl (mod kSlices).
      for (int p = pc + (sl - pc % kSlices + kSlices) % kSlices; p < pc + cn; p += kSlices) {
        const float4 x = *reinterpret_cast<const float4*>(stage + (g * cn + p - pc) * kHeadDim + v * 4);
        const float w = s_w[g * parts + p];
        sum[r][0] = __fmaf_rn(x.x, w, sum[r][0]);
        sum[r][1] = __fmaf_rn(x.y, w, sum[r][1]);
        sum[r][2] = __fmaf_rn(x.z, w, sum[r][2]);
        sum[r][3] = __fmaf_rn(x.w, w, sum[r][3]);
      }
    }
    __syncthreads();  // the stage is rewritten by the next chunk (or by the slice sums)
  }
  float* s_slice = stage;  // [kGroup][kSlices][kHeadDim]
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    const int it = tid + r * kDecodeThreads;
    if (it >= kItems) break;
    const int g = it / (kSlices * kVecs), sl = (it / kVecs) % kSlices, v = it % kVecs;
#pragma unroll
    for (int e = 0; e < 4; ++e) s_slice[(g * kSlices + sl) * kHeadDim + v * 4 + e] = sum[r][e];
  }
  __syncthreads();
  float* out = out_rows + (static_cast<int64_t>(row) * n_heads + head0) * kHeadDim;
  for (int o = tid; o < kGroup * kHeadDim; o += kDecodeThreads) {
    const int g = o / kHeadDim, d = o % kHeadDim;
    float total = 0.0f;
    for (int sl = 0; sl < kSlices; ++sl) total = __fadd_rn(total, s_slice[(g * kSlices + sl) * kHeadDim + d]);
    out[o] = __fmul_rn(total, s_inv[g]);
  }
}

// The merge of one (row, head group)'s partitions by the cluster of its partition blocks (AttentionArgs::
// cluster_merge; the cluster is the group's n_partitions blocks, rank = partition index), with exactly the
// arithmetic of attention_decode_merge (the same weights, slices and orders, so the same bits). Each block
// has its partition's (m, l) in s_m / s_l and its accumulators in s_pacc (a block past the row's keys has
// none, and nobody reads them: every loop runs over the row's `parts` partitions). After a cluster barrier
// block r computes outputs [r · per, (r + 1) · per) of the group's kGroup · kHeadDim, reading its peers'
// shared memory: the weights w_p = exp(m_p - max m) and 1 / l (l = the l_p · w_p in partition order) of the
// heads it needs, then per (output, slice) the sum over the slice's partitions in increasing order into
// s_slice, then the slices in slice order. A second barrier keeps every block's shared memory alive until
// its peers have read it. s_w / s_lw: [kGroup][16] (the score area), s_inv: [kGroup], s_slice: the drained
// ring (never s_pacc's bytes). Not inlined (its registers stay out of the partition loop's).
template <int kHeadDim, int kGroup>
__device__ __noinline__ void merge_in_cluster(float* out_rows, __nv_bfloat16* out_split, int n_heads, int row,
                                              int head0, int parts, const float* s_pacc, const float* s_m,
                                              const float* s_l, float* s_w, float* s_lw, float* s_inv,
                                              float* s_slice) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's partials are in its shared memory
  const int csize = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  static_assert(kHeadDim % 4 == 0);
  constexpr int kVecs = kHeadDim / 4;  // attention_decode_merge's kVec is 4 for every tuned head_dim
  constexpr int kSlices = kVecs >= kMergeThreads ? 1 : kMergeThreads / kVecs;
  constexpr int kOut = kGroup * kHeadDim;
  const int per = (kOut + csize - 1) / csize;
  const int o0 = min(kOut, rank * per), n_out = min(kOut, o0 + per) - o0;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  float* out = out_rows + (static_cast<int64_t>(row) * n_heads + head0) * kHeadDim;
  const int64_t width = int64_t{n_heads} * kHeadDim;
  __nv_bfloat16* split = out_split != nullptr ? out_split + 2 * row * width + int64_t{head0} * kHeadDim : nullptr;
  auto store = [&](int o, float v) {
    out[o] = v;
    if (split != nullptr) split_bf16(v, split[o], split[width + o]);
  };
  if (parts == 0) {  // a row without keys: zeros
    for (int i = tid; i < n_out; i += kDecodeThreads) store(o0 + i, 0.0f);
  } else if (n_out > 0) {
    const int g_first = o0 / kHeadDim, g_last = (o0 + n_out - 1) / kHeadDim;
    for (int g = g_first + warp; g <= g_last; g += kDecodeThreads / 32) {
      float m_p = -INFINITY, l_p = 0.0f;
      if (lane < parts) {
        m_p = cluster.map_shared_rank(s_m, lane)[g];
        l_p = cluster.map_shared_rank(s_l, lane)[g];
      }
      const float m = warp_max(m_p);  // a max: exact in any order
      if (lane < parts) {
        s_w[g * 16 + lane] = expf(m_p - m);
        s_lw[g * 16 + lane] = l_p;
      }
      __syncwarp();
      if (lane == 0) {
        float l = 0.0f;
        for (int p = 0; p < parts; ++p) l = __fmaf_rn(s_lw[g * 16 + p], s_w[g * 16 + p], l);
        s_inv[g] = 1.0f / l;
      }
    }
    __syncthreads();
    for (int it = tid; it < n_out * kSlices; it += kDecodeThreads) {
      const int o = o0 + it / kSlices, sl = it % kSlices, g = o / kHeadDim;
      float sum = 0.0f;
      for (int p = sl; p < parts; p += kSlices) sum = __fmaf_rn(cluster.map_shared_rank(s_pacc, p)[o], s_w[g * 16 + p], sum);
      s_slice[it] = sum;
    }
    __syncthreads();
    for (int i = tid; i < n_out; i += kDecodeThreads) {
      float total = 0.0f;
      for (int sl = 0; sl < kSlices; ++sl) total = __fadd_rn(total, s_slice[i * kSlices + sl]);
      store(o0 + i, __fmul_rn(total, s_inv[(o0 + i) / kHeadDim]));
    }
  }
  cluster.sync();  // the peers have read this block's shared memory
#else
  (void)out_rows, (void)out_split, (void)n_heads, (void)row, (void)head0, (void)parts, (void)s_pacc, (void)s_m;
  (void)s_l, (void)s_w, (void)s_lw, (void)s_inv, (void)s_slice;
  __trap();  // clusters: sm_90 on (the launcher never asks for them before)
#endif
}

// The fused prologue (kFused, FusedPrologue). A block's own keys — the keys of its partition this step writes,
// and for the block that writes them the row's K/V — are computed once into shared memory, slot s holding
// K (normalised and rotated) at s_own + 2 s · kHeadDim and V after it, as floats.
size_t fused_own_bytes(int slots, int head_dim) { return size_t(slots) * 2 * head_dim * sizeof(float); }

// cos and sin of one rotary angle (rope_angle), out of line: inlined at each of the fused prologue's call
// sites, sincosf with its slow path was several hundred instructions of the kernel's code each time.
__device__ __noinline__ float2 fused_rope_angle(float pos, float inv_freq, float scaling) {
  float c, s;
  rope_angle(pos, inv_freq, scaling, c, s);
  return make_float2(c, s);
}

// What a lane holds from before the kernel's wait: the norm weights of its elements d = lane + 32 j, and
// cos and sin (rope_angle) of its pairs i = lane + 32 k < half at the row's position.
template <int kHeadDim>
struct FusedLanes {
  static constexpr int kE = (kHeadDim + 31) / 32;
  static constexpr int kP = (kHeadDim / 2 + 31) / 32;
  float wq[kE], wk[kE];
  float c[kP], s[kP];

  __device__ __forceinline__ void load(const FusedPrologue& f, int row) {
    const int lane = static_cast<int>(threadIdx.x & 31);
#pragma unroll
    for (int j = 0; j < kE; ++j) {
      const int d = lane + 32 * j;
      const bool load = f.q_norm != nullptr && d < kHeadDim;
      wq[j] = load ? load_as_f32(f.q_norm, d, f.norm_dtype) : 0.0f;
      wk[j] = load ? load_as_f32(f.k_norm, d, f.norm_dtype) : 0.0f;
    }
    angles(f, row, c, s);
  }
  __device__ __forceinline__ static void angles(const FusedPrologue& f, int row, float (&c)[kP], float (&s)[kP]) {
    const int lane = static_cast<int>(threadIdx.x & 31);
    const float pos = static_cast<float>(f.positions[row]);
#pragma unroll
    for (int k = 0; k < kP; ++k) {
      const int i = lane + 32 * k;
      const float2 cs =
          i < f.half ? fused_rope_angle(pos, f.inv_freq[i], f.rope_scaling) : make_float2(0.0f, 0.0f);
      c[k] = cs.x;
      s[k] = cs.y;
    }
  }
};

// One head in shared memory (h, kHeadDim floats as the projection wrote them), in place, by one warp: RMSNorm
// (with weights w) when `normed`, then NeoX RoPE of the pairs (i, i + half) by the angles c, s — qk_norm_rope_kv_write's
// arithmetic (rms_scale_of_partials' tree, rms_apply, rope_rotate), so the same bits.
template <int kHeadDim>
__device__ __forceinline__ void norm_rope_head(float* h, bool normed, const float (&w)[FusedLanes<kHeadDim>::kE], float eps,
                                               int half, const float (&c)[FusedLanes<kHeadDim>::kP],
                                               const float (&s)[FusedLanes<kHeadDim>::kP]) {
  using L = FusedLanes<kHeadDim>;
  static_assert(kHeadDim <= kRmsLanes);  // one partial a virtual thread: x[v]², as rms_partial gives it
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (normed) {
    float x[L::kE];
    float p[kRmsLanes / 32];
#pragma unroll
    for (int t = 0; t < kRmsLanes / 32; ++t) p[t] = 0.0f;
#pragma unroll
    for (int j = 0; j < L::kE; ++j) {
      const bool in = lane + 32 * j < kHeadDim;
      x[j] = in ? h[lane + 32 * j] : 0.0f;
      if (in) p[j] = __fmaf_rn(x[j], x[j], 0.0f);
    }
    const float scale = rms_scale_of_partials(p, kHeadDim, eps);
#pragma unroll
    for (int j = 0; j < L::kE; ++j)
      if (lane + 32 * j < kHeadDim) h[lane + 32 * j] = rms_apply(x[j], scale, w[j], false);
    __syncwarp();
  }
#pragma unroll
  for (int k = 0; k < L::kP; ++k) {
    const int i = lane + 32 * k;
    if (i < half) {
      float a = h[i], b = h[i + half];
      rope_rotate(a, b, c[k], s[k]);
      h[i] = a;
      h[i + half] = b;
    }
  }
  __syncwarp();
}

// After the kernel's wait: the block's q_heads query heads (from head0) into s_q and its n_own own keys' k and
// v into their slots, in one batch of 16-byte asynchronous copies (every earlier copy group completes with
// them), then a warp a head normalises and rotates them in place. Ends with a barrier.
template <int kHeadDim>
__device__ __forceinline__ void fused_prologue(const AttentionArgs& a, const FusedLanes<kHeadDim>& lanes, int row,
                                               int head0, int kv_head, int q_heads, float* s_q, float* s_own,
                                               const int* s_own_writer, int n_own) {
  constexpr int kPieces = kHeadDim / 4;  // 16-byte pieces of a head
  static_assert(kHeadDim % 4 == 0);
  const FusedPrologue& f = a.fused;
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * kHeadDim;
  const int q_pieces = q_heads * kPieces, total = q_pieces + n_own * 2 * kPieces;
  const float* q = a.q + (static_cast<int64_t>(row) * a.n_heads + head0) * kHeadDim;
  for (int p = threadIdx.x; p < total; p += kDecodeThreads) {
    if (p < q_pieces) {
      cp_async_16(s_q + 4 * p, q + 4 * p, true);
    } else {
      const int o = p - q_pieces, slot = o / (2 * kPieces), within = o % (2 * kPieces);
      const bool is_v = within >= kPieces;
      const int e = 4 * (within - (is_v ? kPieces : 0));
      const float* src = (is_v ? f.v : f.k) + s_own_writer[slot] * kv_dim + static_cast<int64_t>(kv_head) * kHeadDim;
      cp_async_16(s_own + (2 * slot + (is_v ? 1 : 0)) * kHeadDim + e, src + e, true);
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x / 32);
  const bool normed = f.q_norm != nullptr;
  for (int t = warp; t < q_heads + n_own; t += kDecodeThreads / 32) {
    const bool is_q = t < q_heads;
    float* h = is_q ? s_q + t * kHeadDim : s_own + 2 * (t - q_heads) * kHeadDim;
    float w[FusedLanes<kHeadDim>::kE];
#pragma unroll
    for (int j = 0; j < FusedLanes<kHeadDim>::kE; ++j) w[j] = is_q ? lanes.wq[j] : lanes.wk[j];
    const int writer = is_q ? row : s_own_writer[t - q_heads];
    float c[FusedLanes<kHeadDim>::kP], s[FusedLanes<kHeadDim>::kP];
    if (writer == row) {
#pragma unroll
      for (int k = 0; k < FusedLanes<kHeadDim>::kP; ++k) {
        c[k] = lanes.c[k];
        s[k] = lanes.s[k];
      }
    } else {  // another row's key (a prompt chunk's, a tree's): its own angles
      FusedLanes<kHeadDim>::angles(f, writer, c, s);
    }
    norm_rope_head<kHeadDim>(h, normed, w, f.eps, f.half, c, s);  // one call site: one copy of its code
  }
  __syncthreads();
}

// One 16-byte piece of an own key's K or V (x: kVec floats in its slot) into a ring stage, rounded to the
// cache's dtype as store_cache rounds it: the bits the cache gets.
template <typename T>
__device__ __forceinline__ void own_piece(const float* x, T* dst) {
  if constexpr (sizeof(T) == 2) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = pack_bf16x2(x[2 * i], x[2 * i + 1]);
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    *reinterpret_cast<float4*>(dst) = make_float4(x[0], x[1], x[2], x[3]);
  }
}

// The block (part 0, first head pass) of each row writes the row's K/V of its KV head (own: its slot) into
// the cache, with store_cache's rounding: what qk_norm_rope_kv_write stores.
template <typename T, int kHeadDim>
__device__ __forceinline__ void write_own_kv(const AttentionArgs& a, int row, int kv_head, const float* own) {
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * kHeadDim;
  const int64_t slot = a.write_slots[row];
  require(slot >= 0 && slot < a.cache_slots);
  const int64_t dst = slot * kv_dim + static_cast<int64_t>(kv_head) * kHeadDim;
  constexpr bool kBf16 = sizeof(T) == 2;
  for (int d = threadIdx.x; d < kHeadDim; d += kDecodeThreads) {
    store_cache(a.fused.k_cache, kBf16, dst + d, own[d]);
    store_cache(a.fused.v_cache, kBf16, dst + d, own[kHeadDim + d]);
  }
}

template <typename T, int kHeadDim, int kGroup, Ring kRing, bool kFused>
__global__ void __launch_bounds__(kDecodeThreads, kDecodeBlocksPerSm)
    attention_decode_partition(const AttentionArgs a) {
  // The next kernel may start its own independent loads: at once, or once this block's K/V have landed.
  const bool late_trigger = kFused ? !a.fused.early_trigger : a.partition_late_trigger;
  if (!late_trigger) pdl_launch_dependents();
  using Tr = DecodeTraits<T, kHeadDim, kGroup, kRing, kFused>;
  extern __shared__ __align__(16) uint8_t smem[];
  T* s_ring = reinterpret_cast<T*>(smem);                               // [stages][chunk keys][head_dim]
  float* s_red = reinterpret_cast<float*>(smem);                        // after the ring is drained
  float* s_score = reinterpret_cast<float*>(smem + Tr::kRingBytes);     // [key][kGroup]
  int64_t* s_offset = reinterpret_cast<int64_t*>(smem + Tr::kRingBytes + Tr::kScoreBytes);  // [key]
  float* s_m = reinterpret_cast<float*>(smem + Tr::kRingBytes + Tr::kScoreBytes + Tr::kSlotBytes);
  float* s_l = s_m + kGroup;
  // kFused: the own keys' writer rows, then their count, the row's K/V slot and the merge flag (s_meta); the
  // own keys' floats (fused_own_bytes).
  int* s_own_writer = reinterpret_cast<int*>(s_l + kGroup);  // [kMaxDecodeRows + 1]
  int* s_meta = s_own_writer + kMaxDecodeRows + 1;
  float* s_own = reinterpret_cast<float*>(smem + Tr::kOwnOffset);

  // Head groups vary fastest in the grid: the blocks resident together read all the KV heads of the same
  // keys, so each key's whole K (and V) row of the cache (n_kv_heads · head_dim values) is fetched at about
  // the same time instead of one head's 1/n_kv_heads slice of many rows.
  const int part = blockIdx.y, row = blockIdx.z;
  const int passes = a.group / kGroup;
  const int kv_head = blockIdx.x / passes;
  const int head0 = kv_head * a.group + (blockIdx.x % passes) * kGroup;
  const RowKeys rk = row_keys(a, row);
  const int part_keys = partition_keys(rk.n_keys, a.tiers);
  require(part_keys <= Tr::kPartKeys);  // the launcher's choice of ring
  const int p0 = part * part_keys;
  const int tid = threadIdx.x;
  const bool writes_kv = kFused && part == 0 && blockIdx.x % passes == 0;
  attention_stamp(a, 0);
  // Past this row's keys (the grid covers layout.max_keys): nothing to do. kFused's part 0 of a row
  // without keys goes on with none (n = 0): the row's K/V still go into the cache, its partials are empty.
  if (p0 >= rk.n_keys && !(kFused && part == 0)) {
    if (Tr::kClusterMergeFits && a.cluster_merge) {  // never kFused (DecodeTraits::kClusterMergeFits)
      // No partition here, but a share of the cluster's merge (written after the previous kernels, as the
      // merge kernel's are).
      if (!(a.partition_late_trigger && a.cluster_trigger_end)) pdl_launch_dependents();
      pdl_wait();
      merge_in_cluster<kHeadDim, kGroup>(
          a.out, a.out_split, a.n_heads, row, head0, partition_count(rk.n_keys, a.tiers),
          reinterpret_cast<const float*>(smem + Tr::kRedBytes), s_m, s_l, s_score, s_score + 16 * kGroup,
          s_score + 32 * kGroup, reinterpret_cast<float*>(smem));
    }
    return;
  }
  const int n = min(part_keys, rk.n_keys - p0);
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * kHeadDim;
  // The layout (block tables, lengths, masks, slots) is uploaded before the step: read before the wait.
  // kFused: a key this step writes gets -1 - (its writer's batch row) instead of an offset.
  for (int i = tid; i < n; i += kDecodeThreads) {
    int writer = -1;
    const int64_t slot = key_slot(a, rk, p0 + i, kFused ? &writer : nullptr);
    s_offset[i] = writer >= 0 ? -1 - writer : slot * kv_dim + kv_head * kHeadDim;
  }
  __syncthreads();  // s_offset
  // kFused: the keys that may be the step's own, [fresh0, n).
  const int fresh0 = kFused ? max(0, min(n, rk.n_prefix - a.rows - p0)) : n;
  [[maybe_unused]] FusedLanes<kHeadDim> lanes;
  if constexpr (kFused) {
    // A slot for each own key (its s_offset becomes -1 - slot) and, for the block that writes the row's K/V,
    // one for the row unless its key is among them.
    if (tid == 0) {
      int n_own = 0, kv_slot = -1;
      for (int i = fresh0; i < n; ++i) {
        if (s_offset[i] >= 0) continue;
        const int writer = static_cast<int>(-1 - s_offset[i]);
        if (writer == row) kv_slot = n_own;
        s_own_writer[n_own] = writer;
        s_offset[i] = -1 - n_own++;
      }
      if (writes_kv && kv_slot < 0) {
        s_own_writer[n_own] = row;
        kv_slot = n_own++;
      }
      require(n_own <= a.fused.own_slots);
      s_meta[0] = n_own;
      s_meta[1] = kv_slot;
    }
    __syncthreads();
  }
  attention_stamp(a, 1);
  // Keys [0, stable) of the partition were written by earlier steps (AttentionLayout: a step writes only the
  // last `rows` positions of a prefix, and tree slots), so with early_kv the first chunks' pieces of them are
  // loaded before the wait, while the previous kernel (the q/k prologue that writes this step's keys) runs.
  // kFused instead loads every key but the step's own (which no kernel has written yet) before the wait,
  // telling them apart by s_offset's sign; `stable` is then unused.
  const int stable = a.early_kv ? max(0, min(n, rk.n_prefix - a.rows - p0)) : 0;

  const int lane_k = tid % Tr::kLanesPerKey, key_group = tid / Tr::kLanesPerKey;

  const int n_chunks = (n + Tr::kChunkKeys - 1) / Tr::kChunkKeys;
  const int total_chunks = 2 * n_chunks;  // K chunks, then V chunks
  const uint64_t policy = evict_first_policy();
  // Chunk c's pieces into its ring stage: every piece (kAll), the pieces loaded before the wait (kStable:
  // keys [0, stable); kFused: every key the step does not write), or the others (kFresh: plain L2 loads and
  // shared stores, so that the commit groups stay one per chunk; keys past n are zero-filled; kFused: the
  // step's own keys, computed).
  enum Pieces { kAll, kStable, kFresh };
  auto issue_chunk = [&](int c, Pieces which) {
    const bool is_v = c >= n_chunks;
    const int key0 = (is_v ? c - n_chunks : c) * Tr::kChunkKeys;
    const T* cache = static_cast<const T*>(is_v ? a.v_cache : a.k_cache);
    T* stage = s_ring + (c % Tr::kStages) * (Tr::kStageBytes / sizeof(T));
#pragma unroll
    for (int j = 0; j < Tr::kPiecesPerChunk / kDecodeThreads; ++j) {
      const int piece = j * kDecodeThreads + tid;
      const int kr = piece / Tr::kPiecesPerKey, pc = piece % Tr::kPiecesPerKey;
      const int key = key0 + kr;
      const bool valid = key < n;
      T* dst = stage + kr * kHeadDim + pc * Tr::kVec;
      if constexpr (kFused) {  // the step's own keys: the loop after this one
        const int64_t offset = valid ? s_offset[key] : 0;
        if (which == kFresh || offset < 0) continue;
        const T* src = valid ? cache + offset + pc * Tr::kVec : cache;
        if (a.evict_first) cp_async_16(dst, src, valid, policy);
        else cp_async_16(dst, src, valid);
      } else {
        if (which != kAll && (key < stable) != (which == kStable)) continue;
        const T* src = valid ? cache + s_offset[key] + pc * Tr::kVec : cache;
        if (which == kFresh) *reinterpret_cast<uint4*>(dst) = valid ? __ldcg(reinterpret_cast<const uint4*>(src)) : uint4{};
        else if (a.evict_first) cp_async_16(dst, src, valid, policy);
        else cp_async_16(dst, src, valid);
      }
    }
    if constexpr (kFused) {
      // The pieces of the step's own keys among the chunk's (all in [fresh0, n)), copied into the stage from
      // their slots (fused_prologue computed them) with plain shared stores (no commit group of their own).
      const int first = max(key0, fresh0), last = min(key0 + Tr::kChunkKeys, n);
      if (which == kStable || first >= last) return;
      for (int piece = tid; piece < (last - first) * Tr::kPiecesPerKey; piece += kDecodeThreads) {
        const int key = first + piece / Tr::kPiecesPerKey, pc = piece % Tr::kPiecesPerKey;
        const int64_t offset = s_offset[key];
        if (offset >= 0) continue;
        const int slot = static_cast<int>(-1 - offset);
        own_piece<T>(s_own + (2 * slot + (is_v ? 1 : 0)) * kHeadDim + pc * Tr::kVec,
                     stage + (key - key0) * kHeadDim + pc * Tr::kVec);
      }
    }
  };
  // The ring's fill and the chunk loops stay rolled (unroll 1): unrolled, each iteration was its own copy of
  // issue_chunk, executed once per block, and the kernel's code 12-26% larger (BF16, head dim 128: 5,480 and,
  // fused, 11,656 SASS instructions against 4,352 and 10,408); rolled, the H100 decoded 1K at 181.6 against
  // 181.4 tok/s, and the fused kernel (merge kernel) at 176.9 against 172.1 (docs/benchmarks.md, fortieth
  // session). The same loads in the same order either way.
  if (a.early_kv) {
#pragma unroll 1
    for (int c = 0; c < Tr::kStages - 1; ++c) {
      if (c < total_chunks) issue_chunk(c, kStable);
      cp_async_commit();
    }
  }
  // kFused: the lanes' norm weights and rotary angles, after the early K/V loads are issued (their loads and
  // sincosf would otherwise hold those back).
  if constexpr (kFused) lanes.load(a.fused, row);
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  attention_stamp(a, 2);
  float* s_q = s_score;  // kFused: the block's query heads, normalised and rotated (before any score)
  if constexpr (kFused) {
    fused_prologue<kHeadDim>(a, lanes, row, head0, kv_head, kGroup, s_q, s_own, s_own_writer, s_meta[0]);
    if (writes_kv) write_own_kv<T, kHeadDim>(a, row, kv_head, s_own + 2 * s_meta[1] * kHeadDim);
  }
#pragma unroll 1
  for (int c = 0; c < Tr::kStages - 1; ++c) {
    if (c < total_chunks) issue_chunk(c, a.early_kv ? kFresh : kAll);
    if (!a.early_kv) cp_async_commit();
  }

  // This lane's query elements, kGroup heads.
  float qf[kGroup][Tr::kElems];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const float* qh = kFused ? s_q + g * kHeadDim : a.q + (static_cast<int64_t>(row) * a.n_heads + head0 + g) * kHeadDim;
#pragma unroll
    for (int v = 0; v < Tr::kLoads; ++v) {
#pragma unroll
      for (int e4 = 0; e4 < Tr::kVec / 4; ++e4) {
        const float4 x =
            *reinterpret_cast<const float4*>(qh + (v * Tr::kLanesPerKey + lane_k) * Tr::kVec + e4 * 4);
        qf[g][v * Tr::kVec + e4 * 4 + 0] = x.x;
        qf[g][v * Tr::kVec + e4 * 4 + 1] = x.y;
        qf[g][v * Tr::kVec + e4 * 4 + 2] = x.z;
        qf[g][v * Tr::kVec + e4 * 4 + 3] = x.w;
      }
    }
  }
  // Waits for chunk c (issuing chunk c + Tr::kStages - 1 first) and returns its stage.
  auto begin_chunk = [&](int c) -> const T* {
    if (c + Tr::kStages - 1 < total_chunks) issue_chunk(c + Tr::kStages - 1, kAll);
    cp_async_commit();
    cp_async_wait<Tr::kStages - 1>();
    __syncthreads();  // chunk c has landed for every thread
    return s_ring + (c % Tr::kStages) * (Tr::kStageBytes / sizeof(T));
  };

  // Scores: s_score[i][g] = (q_g · k_i) · scale.
#pragma unroll 1
  for (int c = 0; c < n_chunks; ++c) {
    const T* stage = begin_chunk(c);
    if (c == 0) attention_stamp(a, 3);
    if (a.no_math) {
      __syncthreads();
      continue;
    }
    const int key0 = c * Tr::kChunkKeys;
#pragma unroll
    for (int step = 0; step < Tr::kSteps; ++step) {
      float part_dot[Tr::kStepKeys * kGroup];
#pragma unroll
      for (int u = 0; u < Tr::kStepKeys; ++u) {
        const int kr = (step * Tr::kStepKeys + u) * Tr::kKeySlots + key_group;
        float kf[Tr::kElems];
#pragma unroll
        for (int v = 0; v < Tr::kLoads; ++v) {
          const uint4 raw =
              *reinterpret_cast<const uint4*>(stage + kr * kHeadDim + (v * Tr::kLanesPerKey + lane_k) * Tr::kVec);
          CacheElem<T>::unpack(raw, kf + v * Tr::kVec);
        }
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < Tr::kElems; ++e) dot = fmaf(qf[g][e], kf[e], dot);
          part_dot[u * kGroup + g] = dot;
        }
      }
      transpose_reduce<Tr::kLanesPerKey / 2, Tr::kStepKeys * kGroup>(part_dot, lane_k);
      constexpr int kValues = Tr::kStepKeys * kGroup;
      constexpr int kPer = kValues >= Tr::kLanesPerKey ? kValues / Tr::kLanesPerKey : 1;
      constexpr int kLanesPerValue = kValues >= Tr::kLanesPerKey ? 1 : Tr::kLanesPerKey / kValues;
      if (lane_k % kLanesPerValue == 0) {
        const int idx0 = (lane_k / kLanesPerValue) * kPer;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int idx = idx0 + j, u = idx / kGroup, g = idx % kGroup;
          const int i = key0 + (step * Tr::kStepKeys + u) * Tr::kKeySlots + key_group;
          if (i < n) s_score[i * kGroup + g] = part_dot[j] * a.scale;
        }
      }
    }
    __syncthreads();  // the stage is free for chunk c + Tr::kStages
  }

  attention_stamp(a, 4);
  // Per head: max, p = exp(s - max) in place, l = sum p (the first V chunks are in flight meanwhile).
  {
    const int warp = tid / 32, lane = tid % 32;
    for (int g = warp; g < kGroup; g += kDecodeThreads / 32) {
      float mx = -INFINITY;
      for (int i = lane; i < n; i += 32) mx = fmaxf(mx, s_score[i * kGroup + g]);
      mx = warp_max(mx);
      float sum = 0.0f;
      for (int i = lane; i < n; i += 32) {
        const float p = expf(s_score[i * kGroup + g] - mx);
        s_score[i * kGroup + g] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        s_m[g] = mx;
        s_l[g] = sum;
      }
    }
  }
  __syncthreads();
  attention_stamp(a, 5);

  // acc[g][e] = sum over this lane group's keys, in increasing position, of p_g · v.
  float acc[kGroup][Tr::kElems];
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int e = 0; e < Tr::kElems; ++e) acc[g][e] = 0.0f;
#pragma unroll 1
  for (int c = n_chunks; c < total_chunks; ++c) {
    const T* stage = begin_chunk(c);
    // Once the block's own K/V have landed, its share of the next op's weights (nothing later on this
    // block's path waits for memory): the memory works on them through the rest of the attention chain.
    if (c == total_chunks - 1 && tid < 32)
      l2_prefetch_share(a.prefetch, blockIdx.x + int64_t{gridDim.x} * (blockIdx.y + int64_t{gridDim.y} * blockIdx.z),
                        int64_t{gridDim.x} * gridDim.y * gridDim.z);
    if (a.no_math) {
      __syncthreads();
      continue;
    }
    const int key0 = (c - n_chunks) * Tr::kChunkKeys;
#pragma unroll
    for (int kk = 0; kk < Tr::kChunkKeys / Tr::kKeySlots; ++kk) {
      const int kr = kk * Tr::kKeySlots + key_group;
      const int i = key0 + kr;
      float p[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) p[g] = i < n ? s_score[i * kGroup + g] : 0.0f;
      float vf[Tr::kElems];
#pragma unroll
      for (int v = 0; v < Tr::kLoads; ++v) {
        const uint4 raw =
            *reinterpret_cast<const uint4*>(stage + kr * kHeadDim + (v * Tr::kLanesPerKey + lane_k) * Tr::kVec);
        CacheElem<T>::unpack(raw, vf + v * Tr::kVec);
      }
#pragma unroll
      for (int g = 0; g < kGroup; ++g)
#pragma unroll
        for (int e = 0; e < Tr::kElems; ++e) acc[g][e] = fmaf(p[g], vf[e], acc[g][e]);
    }
    __syncthreads();  // the stage is free for chunk c + Tr::kStages
  }
  // Every K/V load of this block has landed (a cluster that merges may leave it to its blocks' exits).
  if (late_trigger && !(Tr::kClusterMergeFits && a.cluster_merge && a.cluster_trigger_end)) pdl_launch_dependents();
  attention_stamp(a, 6);
  cp_async_wait<0>();  // only empty groups remain; keeps the ring idle before s_red reuses it
  __syncthreads();

  // Sum the lane groups' accumulators in group order: s_red[group][g][d].
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int v = 0; v < Tr::kLoads; ++v)
#pragma unroll
      for (int e = 0; e < Tr::kVec; ++e)
        s_red[(key_group * kGroup + g) * kHeadDim + (v * Tr::kLanesPerKey + lane_k) * Tr::kVec + e] =
            acc[g][v * Tr::kVec + e];
  __syncthreads();
  // Output o (query head o / kHeadDim of the group, element o % kHeadDim) of the partition: its lane groups'
  // accumulators summed in slot order.
  auto slot_sum = [&](int o) {
    const int g = o / kHeadDim, d = o % kHeadDim;
    float sum = 0.0f;
    for (int s = 0; s < Tr::kKeySlots; ++s) sum += s_red[(s * kGroup + g) * kHeadDim + d];
    return sum;
  };
  if (Tr::kClusterMergeFits && a.cluster_merge) {  // the partials stay in shared memory for the cluster's merge
    float* s_pacc = reinterpret_cast<float*>(smem + Tr::kRedBytes);
    for (int o = tid; o < kGroup * kHeadDim; o += kDecodeThreads) s_pacc[o] = slot_sum(o);
    attention_stamp(a, 7);
    merge_in_cluster<kHeadDim, kGroup>(a.out, a.out_split, a.n_heads, row, head0, partition_count(rk.n_keys, a.tiers),
                                       s_pacc, s_m, s_l, s_score, s_score + 16 * kGroup, s_score + 32 * kGroup,
                                       reinterpret_cast<float*>(smem));
    return;
  }
  const int64_t part_index = (static_cast<int64_t>(row) * a.n_heads + head0) * a.n_partitions + part;
  for (int o = tid; o < kGroup * kHeadDim; o += kDecodeThreads)
    a.partial_acc[(part_index + static_cast<int64_t>(o / kHeadDim) * a.n_partitions) * kHeadDim + o % kHeadDim] =
        slot_sum(o);
  if (tid < kGroup) a.partial_ml[part_index + static_cast<int64_t>(tid) * a.n_partitions] = make_float2(s_m[tid], s_l[tid]);
  attention_stamp(a, 7);
  if constexpr (kFused) {
    if (!a.fused.merge) return;
    // The last of the group's partition blocks merges: every block publishes its partials (fence), then
    // counts itself; the block that brings the count to the row's partition count resets it for the next
    // launch and, after a fence of its own, reads the others' partials. A row without keys: zeros (part 0).
    const int parts = partition_count(rk.n_keys, a.tiers);
    if (parts == 0) {
      float* out = a.out + (static_cast<int64_t>(row) * a.n_heads + head0) * kHeadDim;
      for (int o = tid; o < kGroup * kHeadDim; o += kDecodeThreads) out[o] = 0.0f;
      return;
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      int* counter = a.fused.counters + static_cast<int64_t>(row) * gridDim.x + blockIdx.x;
      const bool last = atomicAdd(counter, 1) == parts - 1;
      if (last) *counter = 0;
      s_meta[2] = last;
    }
    __syncthreads();
    if (s_meta[2] == 0) return;
    __threadfence();
    merge_in_block<Tr, kHeadDim, kGroup>(a.partial_ml, a.partial_acc, a.out, a.n_heads, a.n_partitions, row, head0, parts,
                                         smem, s_score, s_m);
  }
}

// ---------------------------------------------------------------------------------------------------
// Generic kernels: runtime head_dim, scalar loads, one query head per block.

struct GenericSmem {
  int64_t offset[kDecodePartitionKeys];  // element offset of each key's head vector
  float score[kDecodePartitionKeys];
  float q[kGenericMaxHeadDim];
  float red[kGenericThreads / 32];
};

// max and sum over the block in a fixed order (warp butterfly, then the warps in index order); every
// thread gets the result.
__device__ float block_max(float v, float* red) {
  v = warp_max(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kGenericThreads / 32; ++w) r = fmaxf(r, red[w]);
  __syncthreads();
  return r;
}
__device__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kGenericThreads / 32; ++w) r += red[w];
  __syncthreads();
  return r;
}

// One partition [p0, p0 + part_keys) of a row for one query head (its query already in s.q): the partition's
// max score m, l = sum exp(s - m), and acc[j] = sum exp(s - m) v[d] for d = threadIdx.x + j * 128.
template <typename T>
__device__ void generic_partition(const AttentionArgs& a, const RowKeys& rk, int kv_head, int p0, int part_keys,
                                  GenericSmem& s, float& m, float& l, float (&acc)[kGenericDimsPerThread]) {
  const int n = min(part_keys, rk.n_keys - p0), d_max = a.head_dim, tid = threadIdx.x;
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * d_max;
  __syncthreads();  // the previous partition's readers of s.offset / s.score, and s.q's writers
  for (int i = tid; i < n; i += kGenericThreads) s.offset[i] = key_slot(a, rk, p0 + i) * kv_dim + kv_head * d_max;
  __syncthreads();
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  float mx = -INFINITY;
  for (int i = tid; i < n; i += kGenericThreads) {
    float dot = 0.0f;
    for (int d = 0; d < d_max; ++d) dot = fmaf(s.q[d], CacheElem<T>::load(k_cache + s.offset[i] + d), dot);
    dot *= a.scale;
    s.score[i] = dot;
    mx = fmaxf(mx, dot);
  }
  mx = block_max(mx, s.red);
  float sum = 0.0f;
  for (int i = tid; i < n; i += kGenericThreads) {
    const float p = expf(s.score[i] - mx);
    s.score[i] = p;
    sum += p;
  }
  sum = block_sum(sum, s.red);  // its barriers also publish s.score
#pragma unroll
  for (int j = 0; j < kGenericDimsPerThread; ++j) {
    const int d = tid + j * kGenericThreads;
    float v = 0.0f;
    if (d < d_max)
      for (int i = 0; i < n; ++i) v = fmaf(s.score[i], CacheElem<T>::load(v_cache + s.offset[i] + d), v);
    acc[j] = v;
  }
  m = mx;
  l = sum;
}

__device__ void load_query(const AttentionArgs& a, int row, int head, float* s_q) {
  const float* q = a.q + (static_cast<int64_t>(row) * a.n_heads + head) * a.head_dim;
  for (int d = threadIdx.x; d < a.head_dim; d += kGenericThreads) s_q[d] = q[d];
}

// Decode: grid (n_partitions, n_heads, rows); writes the same partials as attention_decode_partition.
template <typename T>
__global__ void __launch_bounds__(kGenericThreads) attention_decode_partition_generic(const AttentionArgs a) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  __shared__ GenericSmem s;
  const int part = blockIdx.x, head = blockIdx.y, row = blockIdx.z;
  const RowKeys rk = row_keys(a, row);
  const int part_keys = partition_keys(rk.n_keys, a.tiers);
  const int p0 = part * part_keys;
  if (p0 >= rk.n_keys) return;
  load_query(a, row, head, s.q);
  float m, l, acc[kGenericDimsPerThread];
  generic_partition<T>(a, rk, head / a.group, p0, part_keys, s, m, l, acc);
  const int64_t part_index = (static_cast<int64_t>(row) * a.n_heads + head) * a.n_partitions + part;
#pragma unroll
  for (int j = 0; j < kGenericDimsPerThread; ++j) {
    const int d = threadIdx.x + j * kGenericThreads;
    if (d < a.head_dim) a.partial_acc[part_index * a.head_dim + d] = acc[j];
  }
  if (threadIdx.x == 0) a.partial_ml[part_index] = make_float2(m, l);
}

// Prefill (any head_dim): grid (n_heads, rows); each block walks its row's partitions in order and merges
// them as it goes.
template <typename T>
__global__ void __launch_bounds__(kGenericThreads) attention_rows_generic(const AttentionArgs a) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  __shared__ GenericSmem s;
  const int head = blockIdx.x, row = blockIdx.y;
  const RowKeys rk = row_keys(a, row);
  load_query(a, row, head, s.q);
  float run_m = -INFINITY, run_l = 0.0f, run_acc[kGenericDimsPerThread] = {};
  for (int p0 = 0; p0 < rk.n_keys; p0 += kGenericPrefillKeys) {
    float m, l, acc[kGenericDimsPerThread];
    generic_partition<T>(a, rk, head / a.group, p0, kGenericPrefillKeys, s, m, l, acc);
    const float new_m = fmaxf(run_m, m);
    const float old_w = expf(run_m - new_m), new_w = expf(m - new_m);
    run_l = run_l * old_w + l * new_w;
#pragma unroll
    for (int j = 0; j < kGenericDimsPerThread; ++j) run_acc[j] = run_acc[j] * old_w + acc[j] * new_w;
    run_m = new_m;
  }
  float* out = a.out + (static_cast<int64_t>(row) * a.n_heads + head) * a.head_dim;
  const float inv = run_l > 0.0f ? 1.0f / run_l : 0.0f;
#pragma unroll
  for (int j = 0; j < kGenericDimsPerThread; ++j) {
    const int d = threadIdx.x + j * kGenericThreads;
    if (d < a.head_dim) out[d] = run_acc[j] * inv;
  }
}

// ---------------------------------------------------------------------------------------------------
// Merge: grid (n_heads, rows). out = sum_p acc_p w_p / sum_p l_p w_p with w_p = exp(m_p - max_p m_p) over
// the row's partitions. The order is fixed by (partition count, head_dim, kVec): l sums the partitions in
// increasing order; a thread owns kVec consecutive dims of slice s and sums partitions s, s + slices, ... in
// increasing order, then the slices are added in slice order (slices = kMergeThreads / (head_dim / kVec)).
// Each thread issues its partitions' loads 16 at a time, the first 16 before the (m, l) loads (a row at
// 32K has 128 partitions, 16 per slice of a 128-dim head: all of them), and the partitions' (m, l) pass
// through shared memory so that l's serial sum reads no global memory. Dynamic shared memory:
// merge_smem_bytes.
template <int kVec>
__global__ void __launch_bounds__(kMergeThreads) attention_decode_merge(const AttentionArgs a) {
  const int head = blockIdx.x, row = blockIdx.y, tid = threadIdx.x, d_max = a.head_dim;
  const RowKeys rk = row_keys(a, row);  // the layout is uploaded before the step: read before the wait
  // The next kernel may start its own independent loads: at once (Context::merge_early_trigger_keys), or
  // once the partitions are done.
  if (a.merge_early_trigger) pdl_launch_dependents();
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  if (!a.merge_early_trigger) pdl_launch_dependents();
  extern __shared__ float s_merge[];
  float* s_w = s_merge;                           // [n_partitions] m_p, then w_p
  float* s_l = s_merge + a.n_partitions;          // [n_partitions] l_p
  float* s_slice = s_merge + 2 * a.n_partitions;  // [slices][head_dim] slice sums
  __shared__ float s_red[kMergeThreads / 32];
  float* out = a.out + (static_cast<int64_t>(row) * a.n_heads + head) * d_max;
  // Element d of this head: out, and its split when asked for (the same split that o_proj's split kernel
  // would make of out).
  const int64_t width = int64_t{a.n_heads} * d_max;
  __nv_bfloat16* split_hi = a.out_split != nullptr ? a.out_split + 2 * row * width + int64_t{head} * d_max : nullptr;
  auto store = [&](int d, float v) {
    out[d] = v;
    if (split_hi != nullptr) split_bf16(v, split_hi[d], split_hi[width + d]);
  };
  if (rk.n_keys == 0) {
    for (int d = tid; d < d_max; d += kMergeThreads) store(d, 0.0f);
    return;
  }
  const int parts = partition_count(rk.n_keys, a.tiers);
  const int64_t base = (static_cast<int64_t>(row) * a.n_heads + head) * a.n_partitions;
  using Vec = std::conditional_t<kVec == 4, float4, float>;
  const int vecs = d_max / kVec;  // kVec-wide pieces of a head
  const int slices = vecs >= kMergeThreads ? 1 : kMergeThreads / vecs;
  const int slice = tid / vecs, v0 = tid % vecs;
  const bool active = slice < slices;
  const Vec* acc = reinterpret_cast<const Vec*>(a.partial_acc + base * d_max);
  // This thread's first kBatch accumulators are loaded before the weights are known: their round trip
  // overlaps the (m, l) loads'.
  constexpr int kBatch = 16;
  Vec xs[kBatch];
  auto load_batch = [&](int v, int p0) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int p = p0 + j * slices;
      if (p < parts) xs[j] = acc[static_cast<int64_t>(p) * vecs + v];
    }
  };
  if (active) load_batch(v0, slice);

  const float2* ml = a.partial_ml + base;
  float m = -INFINITY;  // a max: exact in any order
  for (int p = tid; p < parts; p += kMergeThreads) {
    const float2 v = ml[p];
    s_w[p] = v.x;
    s_l[p] = v.y;
    m = fmaxf(m, v.x);
  }
  m = warp_max(m);
  if (tid % 32 == 0) s_red[tid / 32] = m;
  __syncthreads();
  for (int w = 0; w < kMergeThreads / 32; ++w) m = fmaxf(m, s_red[w]);
  for (int p = tid; p < parts; p += kMergeThreads) s_w[p] = expf(s_w[p] - m);  // this thread's own p
  __syncthreads();

  for (int v = v0; active && v < vecs; v += kMergeThreads) {
    float sum[kVec] = {};
    for (int p0 = slice; p0 < parts; p0 += kBatch * slices) {
      if (v != v0 || p0 != slice) load_batch(v, p0);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int p = p0 + j * slices;
        if (p >= parts) break;
        const float w = s_w[p];  // explicit FMAs: merge_in_block (the fused kernel's merge) does the same
        if constexpr (kVec == 4) {
          sum[0] = __fmaf_rn(xs[j].x, w, sum[0]);
          sum[1] = __fmaf_rn(xs[j].y, w, sum[1]);
          sum[2] = __fmaf_rn(xs[j].z, w, sum[2]);
          sum[3] = __fmaf_rn(xs[j].w, w, sum[3]);
        } else {
          sum[0] = __fmaf_rn(xs[j], w, sum[0]);
        }
      }
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) s_slice[slice * d_max + v * kVec + e] = sum[e];
  }
  float l = 0.0f;
#pragma unroll 8
  for (int p = 0; p < parts; ++p) l = __fmaf_rn(s_l[p], s_w[p], l);
  const float inv = 1.0f / l;
  __syncthreads();
  for (int d = tid; d < d_max; d += kMergeThreads) {
    float sum = 0.0f;
    for (int sl = 0; sl < slices; ++sl) sum = __fadd_rn(sum, s_slice[sl * d_max + d]);
    store(d, __fmul_rn(sum, inv));
  }
}

// The merge's piece width: four dims per thread when the head allows, a function of the shape only (the
// same summation order for any batch).
int merge_vec(int head_dim) { return head_dim % 4 == 0 ? 4 : 1; }

// Shared memory of attention_decode_merge for a grid of n_partitions partitions: (m, l) per partition, then
// the slice sums — slices · head_dim floats, at most vec · kMergeThreads, or one head_dim when a single
// slice is wider than that (head_dim / vec > kMergeThreads).
size_t merge_smem_bytes(int64_t n_partitions, int head_dim) {
  const int64_t vec = merge_vec(head_dim);
  return static_cast<size_t>(2 * n_partitions + std::max<int64_t>(head_dim, vec * kMergeThreads)) * sizeof(float);
}

// ---------------------------------------------------------------------------------------------------
// Prefill kernel (tensor cores). grid (n_heads, ceil(rows / kBlockRows)), blocks of the last rows first
// (they have the most keys). Warp w owns rows [w * 16 * kMTiles, (w + 1) * 16 * kMTiles) of the block.
template <int kHeadDim>
struct PrefillTraits {
  static constexpr int kWarps = kHeadDim == 256 ? 8 : 4;
  static constexpr int kMTiles = kHeadDim == 256 ? 1 : 2;  // 16-row MMA tiles per warp
  static constexpr int kBlockRows = 16 * kMTiles * kWarps;  // 128
  static constexpr int kBlockKeys = kHeadDim >= 128 ? 32 : 64;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStride = kHeadDim + 8;  // bf16 per shared row: +16 bytes keeps ldmatrix conflict-free
  static constexpr size_t kSmemBytes = size_t{kBlockRows + 4 * kBlockKeys} * kStride * sizeof(bf16);
  static_assert(kHeadDim % 16 == 0 && kBlockKeys % 16 == 0);
  static_assert((kBlockKeys * kHeadDim / 8) % kThreads == 0);
};

// K and V of keys [tile * kBlockKeys, +kBlockKeys) of one block table into shared memory as bf16; keys at
// or past `key_end` are zero-filled. BF16 caches go through cp.async; F32 caches are converted on the way.
template <typename T, int kHeadDim>
__device__ __forceinline__ void prefill_load_kv(const AttentionArgs& a, const int32_t* table, int kv_head, int tile,
                                                int key_end, bf16* s_k, bf16* s_v) {
  using Tr = PrefillTraits<kHeadDim>;
  constexpr int kPieces = kHeadDim / 8;  // 16-byte bf16 pieces per key
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * kHeadDim;
#pragma unroll
  for (int j = 0; j < Tr::kBlockKeys * kPieces / Tr::kThreads; ++j) {
    const int idx = j * Tr::kThreads + threadIdx.x;
    const int kr = idx / kPieces, c = (idx % kPieces) * 8;
    const int key = tile * Tr::kBlockKeys + kr;
    const bool valid = key < key_end;
    int64_t offset = 0;
    if (valid) {
      const int64_t slot = static_cast<int64_t>(table[key / a.page_size]) * a.page_size + key % a.page_size;
      require(slot >= 0 && slot < a.cache_slots);
      offset = slot * kv_dim + kv_head * kHeadDim + c;
    }
    bf16* dk = s_k + kr * Tr::kStride + c;
    bf16* dv = s_v + kr * Tr::kStride + c;
    if constexpr (sizeof(T) == 2) {
      cp_async_16(dk, static_cast<const bf16*>(a.k_cache) + offset, valid);
      cp_async_16(dv, static_cast<const bf16*>(a.v_cache) + offset, valid);
    } else {
      float4 k0 = make_float4(0, 0, 0, 0), k1 = k0, v0 = k0, v1 = k0;
      if (valid) {
        const float* kp = static_cast<const float*>(a.k_cache) + offset;
        const float* vp = static_cast<const float*>(a.v_cache) + offset;
        k0 = *reinterpret_cast<const float4*>(kp);
        k1 = *reinterpret_cast<const float4*>(kp + 4);
        v0 = *reinterpret_cast<const float4*>(vp);
        v1 = *reinterpret_cast<const float4*>(vp + 4);
      }
      *reinterpret_cast<uint4*>(dk) =
          make_uint4(pack_bf16x2(k0.x, k0.y), pack_bf16x2(k0.z, k0.w), pack_bf16x2(k1.x, k1.y), pack_bf16x2(k1.z, k1.w));
      *reinterpret_cast<uint4*>(dv) =
          make_uint4(pack_bf16x2(v0.x, v0.y), pack_bf16x2(v0.z, v0.w), pack_bf16x2(v1.x, v1.y), pack_bf16x2(v1.z, v1.w));
    }
  }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(PrefillTraits<kHeadDim>::kThreads, 1) attention_prefill_tiles(const AttentionArgs a) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  using Tr = PrefillTraits<kHeadDim>;
  constexpr int kBM = Tr::kBlockRows, kBN = Tr::kBlockKeys, kMT = Tr::kMTiles, kStride = Tr::kStride;
  constexpr int kNTiles = kBN / 8;        // 8-key column tiles of S
  constexpr int kDTiles = kHeadDim / 8;   // 8-wide column tiles of O
  extern __shared__ __align__(16) uint8_t smem[];
  bf16* s_q = reinterpret_cast<bf16*>(smem);  // [kBM][kStride]
  bf16* s_k = s_q + kBM * kStride;            // [2][kBN][kStride]
  bf16* s_v = s_k + 2 * kBN * kStride;        // [2][kBN][kStride]
  __shared__ int s_table[kBM], s_nkeys[kBM];

  const int head = blockIdx.x, kv_head = head / a.group;
  const int r0 = (gridDim.y - 1 - blockIdx.y) * kBM;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t q_stride = static_cast<int64_t>(a.n_heads) * kHeadDim;

  for (int i = tid; i < kBM; i += Tr::kThreads) {
    const int r = r0 + i;
    int table = -1, n_keys = 0;
    if (r < a.rows) {
      table = a.row_table[r];
      require(table >= 0 && table < a.n_tables);
      n_keys = a.prefix_lens[r];
      require(n_keys >= 0 && static_cast<int64_t>(n_keys) <= static_cast<int64_t>(a.max_pages) * a.page_size);
      require(a.tree_masks == nullptr || a.tree_masks[r] == 0);  // tree rows only in decode/verify batches
    }
    s_table[i] = table;
    s_nkeys[i] = n_keys;
  }
  for (int i = tid; i < kBM * kHeadDim / 4; i += Tr::kThreads) {
    const int rr = i / (kHeadDim / 4), c = (i % (kHeadDim / 4)) * 4;
    float4 x = make_float4(0, 0, 0, 0);
    if (r0 + rr < a.rows) x = *reinterpret_cast<const float4*>(a.q + (r0 + rr) * q_stride + head * kHeadDim + c);
    *reinterpret_cast<uint2*>(s_q + rr * kStride + c) = make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
  }
  __syncthreads();

  const float scale_log2 = a.scale * 1.4426950408889634f;  // scores in log2 units: exp2 below
  const int warp_row0 = warp * 16 * kMT;
  float o[kMT][kDTiles][4];
  float m[kMT][2], l[kMT][2];  // [m-tile][row lane/4, row lane/4 + 8]
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  // Runs of consecutive rows with the same block table; rows past a.rows (table -1) end the block.
  for (int run_begin = 0; run_begin < kBM && s_table[run_begin] >= 0;) {
    const int table_id = s_table[run_begin];
    int run_end = run_begin + 1, key_end = s_nkeys[run_begin];
    while (run_end < kBM && s_table[run_end] == table_id) key_end = max(key_end, s_nkeys[run_end++]);
    int row_keys_of[kMT][2];  // this thread's rows' key counts, 0 outside the run
    int warp_key_end = 0;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int rr = warp_row0 + mt * 16 + half * 8 + lane / 4;
        row_keys_of[mt][half] = rr >= run_begin && rr < run_end ? s_nkeys[rr] : 0;
      }
    for (int rr = max(warp_row0, run_begin); rr < min(warp_row0 + 16 * kMT, run_end); ++rr)
      warp_key_end = max(warp_key_end, s_nkeys[rr]);
    const int32_t* table = a.block_tables + static_cast<int64_t>(table_id) * a.max_pages;
    const int n_tiles = (key_end + kBN - 1) / kBN;

    if (n_tiles > 0) prefill_load_kv<T, kHeadDim>(a, table, kv_head, 0, key_end, s_k, s_v);
    cp_async_commit();
    for (int t = 0; t < n_tiles; ++t) {
      const int stage = t & 1;
      if (t + 1 < n_tiles) {
        prefill_load_kv<T, kHeadDim>(a, table, kv_head, t + 1, key_end, s_k + (stage ^ 1) * kBN * kStride,
                                     s_v + (stage ^ 1) * kBN * kStride);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      if (t * kBN < warp_key_end) {
        const bf16* sk = s_k + stage * kBN * kStride;
        const bf16* sv = s_v + stage * kBN * kStride;
        // S = Q Kᵀ for the warp's rows and the tile's keys.
        float s[kMT][kNTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
        // Unrolled by 2, not fully: a full unroll hoists every k-step's ldmatrix and spills at head_dim 128.
#pragma unroll 2
        for (int ks = 0; ks < kHeadDim / 16; ++ks) {
          uint32_t qa[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            ldmatrix_x4(qa[mt], s_q + (warp_row0 + mt * 16 + lane % 16) * kStride + ks * 16 + (lane / 16) * 8);
#pragma unroll
          for (int np = 0; np < kBN / 16; ++np) {
            uint32_t kb[4];
            ldmatrix_x4(kb, sk + (np * 16 + lane % 8 + (lane / 16) * 8) * kStride + ks * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma_bf16_16x8x16(s[mt][2 * np], qa[mt], kb[0], kb[1]);
              mma_bf16_16x8x16(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
            }
          }
        }
        // Mask (key position >= the row's key count), online softmax in log2 units.
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int keys = row_keys_of[mt][half];
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int key = t * kBN + nt * 8 + (lane % 4) * 2 + e;
                float& x = s[mt][nt][half * 2 + e];
                x = key < keys ? x * scale_log2 : -INFINITY;
                mx = fmaxf(mx, x);
              }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[mt][half], mx);
            const float m_ref = m_new == -INFINITY ? 0.0f : m_new;  // no key yet: keep everything at 0
            const float alpha = exp2f(m[mt][half] - m_ref);
            float row_sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                float& x = s[mt][nt][half * 2 + e];
                x = exp2f(x - m_ref);
                row_sum += x;
              }
            l[mt][half] = l[mt][half] * alpha + row_sum;  // this lane's share; summed over the quad at the end
            m[mt][half] = m_new;
#pragma unroll
            for (int dt = 0; dt < kDTiles; ++dt) {
              o[mt][dt][half * 2] *= alpha;
              o[mt][dt][half * 2 + 1] *= alpha;
            }
          }
        }
        // O += P V.
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk) {
          uint32_t pa[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            pa[mt][0] = pack_bf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][1] = pack_bf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][2] = pack_bf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][3] = pack_bf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
          }
#pragma unroll
          for (int dp = 0; dp < kHeadDim / 16; ++dp) {
            uint32_t vb[4];
            ldmatrix_x4_trans(vb, sv + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kStride + dp * 16 + (lane / 16) * 8);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma_bf16_16x8x16(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
              mma_bf16_16x8x16(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
            }
          }
        }
      }
      __syncthreads();  // the stage is free for tile t + 2
    }
    run_begin = run_end;
  }

#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float lt = l[mt][half];
      lt += __shfl_xor_sync(0xffffffffu, lt, 1);
      lt += __shfl_xor_sync(0xffffffffu, lt, 2);
      const float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
      const int r = r0 + warp_row0 + mt * 16 + half * 8 + lane / 4;
      if (r < a.rows) {
        float* out = a.out + r * q_stride + head * kHeadDim + (lane % 4) * 2;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt)
          *reinterpret_cast<float2*>(out + dt * 8) = make_float2(o[mt][dt][half * 2] * inv, o[mt][dt][half * 2 + 1] * inv);
      }
    }
}

// ---------------------------------------------------------------------------------------------------
// Launchers.

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Head dims with tuned kernels (both families); others take the generic kernels.
bool tuned_head_dim(int d) { return d == 16 || d == 32 || d == 64 || d == 128 || d == 256; }

// Query heads per decode block: the largest of 8, 4, 2, 1 dividing the GQA group.
int decode_heads_per_block(int group) { return group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1; }

// Shared memory for a decode partition block of `need` bytes in a grid of `blocks`: with
// Context::attention_spread, a grid that would leave multiprocessors without blocks at four per
// multiprocessor gets blocks large enough that only ceil(blocks / multiprocessors) fit on one, so that the
// block scheduler spreads them over the device instead of filling the first multiprocessors freed by the
// previous kernel (each multiprocessor streams at a bounded rate: in the 32K timeline the blocks of
// multiprocessors holding three finished ~25% before those holding four). The extra bytes are unused;
// the arithmetic is the same. H200, Qwen3-8B shape, decode tok/s (docs/benchmarks.md, fifteenth session):
// at 4K (256 blocks) 76 KB blocks, two per multiprocessor, 209.4 / 208.3 against 205.3 / 205.7 packed; at
// 8K (256 blocks) 76 KB gained nothing while 79–112 KB gained 2.3% (213.4 / 213.1 at 79 KB against 208.8 /
// 208.0; not explained — something else fits beside two 76 KB blocks), hence the 4 KB over the bound; with
// it, 4K 212.1 against 208.7 and 8K 207.5 against 206.4 off (one run each).
size_t decode_block_smem(const Context& c, int64_t blocks, size_t need) {
  need += c.attention_smem_pad;
  if (!c.attention_spread || c.sm_count <= 0) return need;
  const int64_t per_sm = (blocks + c.sm_count - 1) / c.sm_count;
  if (per_sm >= kDecodeBlocksPerSm) return need;
  // per_sm + 1 blocks of this size (and the per-block reservation) overflow the multiprocessor, by 4 KB.
  return smem_for_residency(per_sm, need, 4096);
}

template <typename T, int kHeadDim, int kGroup, Ring kRing, bool kFused>
void launch_decode_partition_ring(const Context& c, const AttentionArgs& a, int64_t blocks) {
  using Tr = DecodeTraits<T, kHeadDim, kGroup, kRing, kFused>;
  auto kernel = attention_decode_partition<T, kHeadDim, kGroup, kRing, kFused>;
  const size_t need = kFused ? Tr::kOwnOffset + fused_own_bytes(a.fused.own_slots, kHeadDim) : Tr::kSmemBytes;
  const size_t smem = decode_block_smem(c, blocks, need);
  HELIUM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(a.n_kv_heads * (a.group / kGroup), a.n_partitions, a.rows);
  launch(c, kernel, grid, kDecodeThreads, smem, a);
}

// The ring (Ring; Context::attention_ring forces one where it can run): the short one while no row's
// partitions are longer than 128 keys (layout.max_keys up to the tiers' medium_end), else the wide one.
Ring decode_ring(const Context& c, const AttentionArgs& a) {
  const bool long_partitions = max_partition_keys(a.max_keys, a.tiers) > kShortPartitionKeys;
  if (long_partitions || c.attention_ring == Context::kRingWide) return Ring::kWide;
  return Ring::kShort;
}

// The partition kernel launched in clusters of one (row, head group)'s a.n_partitions blocks, which merge
// the group's partials themselves (merge_in_cluster), when the instance has room for it and every cluster of
// the grid can be resident at once (cudaOccupancyMaxActiveClusters, asked once per instance and cluster
// size); false: nothing launched. The blocks keep their compact size (no spread): a cluster must fit in
// one GPC.
template <typename T, int kHeadDim, int kGroup, Ring kRing>
bool launch_decode_partition_clusters(const Context& c, const AttentionArgs& a) {
  using Tr = DecodeTraits<T, kHeadDim, kGroup, kRing, false>;
  if constexpr (!Tr::kClusterMergeFits) {
    (void)c, (void)a;
    return false;
  } else {
    auto kernel = attention_decode_partition<T, kHeadDim, kGroup, kRing, false>;
    const int size = a.n_partitions;
    const size_t smem = Tr::kSmemBytes + c.attention_smem_pad;
    const dim3 grid(a.n_kv_heads * (a.group / kGroup), size, a.rows);
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(kDecodeThreads);
    config.dynamicSmemBytes = smem;
    config.stream = c.stream;
    cudaLaunchAttribute attributes[2]{};
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = 1;
    attributes[0].val.clusterDim.y = static_cast<unsigned>(size);
    attributes[0].val.clusterDim.z = 1;
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attributes;
    config.numAttrs = c.pdl ? 2 : 1;
    HELIUM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    if (size > 8) HELIUM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    // Resident clusters of this instance and size on an idle device, + 1 (0: not asked yet).
    static std::atomic<int> resident[17];
    int clusters = c.attention_smem_pad == 0 ? resident[size].load() - 1 : -1;
    if (clusters < 0) {
      if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
        cudaGetLastError();  // not a launch error: the merge kernel takes over
        clusters = 0;
      }
      if (c.attention_smem_pad == 0) resident[size].store(clusters + 1);
    }
    if (int64_t{clusters} < int64_t{grid.x} * grid.z) return false;
    AttentionArgs b = a;
    b.cluster_merge = true;
    if (c.stream_queue != nullptr) flush_stream(c);
    HELIUM_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, b));
    ++c.attention_cluster_merges;
    return true;
  }
}

// Early K/V loads (Context::attention_early_kv) only when the whole grid is resident at once: then every
// block loads its first chunks while the q/k prologue runs. A grid of several waves gains only in its first
// wave, and its early loads take the memory from the prologue it waits for. H200, Qwen3-8B shape
// (docs/benchmarks.md, ninth session), decode tok/s with early loads in every grid / none: 1K 207.0 /
// 205.4-205.7 (128 blocks, one wave), 32K 163.3-163.6 / 164.6-164.7 (1,024 blocks, two waves).
// Returns whether the partition blocks merged (launched in clusters): then no merge kernel follows.
template <typename T, int kHeadDim, int kGroup, bool kFused>
bool launch_decode_partition(const Context& c, const AttentionArgs& a) {
  const int64_t blocks = int64_t{a.n_kv_heads} * (a.group / kGroup) * a.n_partitions * a.rows;
  const Ring ring = decode_ring(c, a);
  AttentionArgs b = a;
  b.early_kv = a.early_kv && c.sm_count > 0 && blocks <= int64_t{kDecodeBlocksPerSm} * c.sm_count;
  b.cluster_merge = false;
  if (!kFused && a.cluster_merge) {
    const bool merged = ring == Ring::kWide ? launch_decode_partition_clusters<T, kHeadDim, kGroup, Ring::kWide>(c, b)
                                            : launch_decode_partition_clusters<T, kHeadDim, kGroup, Ring::kShort>(c, b);
    if (merged) return true;
  }
  if (ring == Ring::kWide) launch_decode_partition_ring<T, kHeadDim, kGroup, Ring::kWide, kFused>(c, b, blocks);
  else launch_decode_partition_ring<T, kHeadDim, kGroup, Ring::kShort, kFused>(c, b, blocks);
  return false;
}

template <typename T, int kHeadDim, bool kFused>
bool launch_decode_partition_dim(const Context& c, const AttentionArgs& a) {
  switch (decode_heads_per_block(a.group)) {
    case 8: return launch_decode_partition<T, kHeadDim, 8, kFused>(c, a);
    case 4: return launch_decode_partition<T, kHeadDim, 4, kFused>(c, a);
    case 2: return launch_decode_partition<T, kHeadDim, 2, kFused>(c, a);
    default: return launch_decode_partition<T, kHeadDim, 1, kFused>(c, a);
  }
}

// Decode: the partition kernel (kFused: with the q/k prologue, attention_with_prologue), then the merge
// unless the fused kernel merges itself (a.fused.merge).
template <typename T, bool kFused = false>
void launch_decode(const Context& c, const AttentionArgs& a, bool tuned) {
  bool merged = false;  // by the partition kernel's clusters
  if (c.omit & kOmitAttention) {
  } else if (tuned) {
    switch (a.head_dim) {
      case 16: merged = launch_decode_partition_dim<T, 16, kFused>(c, a); break;
      case 32: merged = launch_decode_partition_dim<T, 32, kFused>(c, a); break;
      case 64: merged = launch_decode_partition_dim<T, 64, kFused>(c, a); break;
      case 128: merged = launch_decode_partition_dim<T, 128, kFused>(c, a); break;
      default: merged = launch_decode_partition_dim<T, 256, kFused>(c, a); break;
    }
  } else {
    const dim3 grid(a.n_partitions, a.n_heads, a.rows);
    launch(c, attention_decode_partition_generic<T>, grid, kGenericThreads, 0, a);
  }
  HELIUM_CUDA_CHECK(cudaGetLastError());
  if (merged || (c.omit & kOmitMerge) || (kFused && a.fused.merge)) return;
  const dim3 grid(a.n_heads, a.rows);
  const size_t smem = merge_smem_bytes(a.n_partitions, a.head_dim);
  if (merge_vec(a.head_dim) == 4) launch(c, attention_decode_merge<4>, grid, kMergeThreads, smem, a);
  else launch(c, attention_decode_merge<1>, grid, kMergeThreads, smem, a);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

// Shared memory a block may opt in to on the current device (99 KB on sm_86/89, 163 KB on sm_80, 227 KB
// on sm_90).
int max_shared_bytes_per_block() {
  int device = 0, bytes = 0;
  HELIUM_CUDA_CHECK(cudaGetDevice(&device));
  HELIUM_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

template <typename T, int kHeadDim>
void launch_prefill_tiles(const Context& c, const AttentionArgs& a) {
  using Tr = PrefillTraits<kHeadDim>;
  if (Tr::kSmemBytes + sizeof(int) * 2 * Tr::kBlockRows > static_cast<size_t>(max_shared_bytes_per_block())) {
    const dim3 grid(a.n_heads, a.rows);  // e.g. head_dim 256 on sm_89
    launch(c, attention_rows_generic<T>, grid, kGenericThreads, 0, a);
    return;
  }
  auto kernel = attention_prefill_tiles<T, kHeadDim>;
  HELIUM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(Tr::kSmemBytes)));
  const dim3 grid(a.n_heads, (a.rows + Tr::kBlockRows - 1) / Tr::kBlockRows);
  launch(c, kernel, grid, Tr::kThreads, Tr::kSmemBytes, a);
}

template <typename T>
void launch_prefill(const Context& c, const AttentionArgs& a, bool tuned) {
  if (tuned) {
    switch (a.head_dim) {
      case 16: launch_prefill_tiles<T, 16>(c, a); break;
      case 32: launch_prefill_tiles<T, 32>(c, a); break;
      case 64: launch_prefill_tiles<T, 64>(c, a); break;
      case 128: launch_prefill_tiles<T, 128>(c, a); break;
      default: launch_prefill_tiles<T, 256>(c, a); break;
    }
  } else {
    const dim3 grid(a.n_heads, a.rows);
    launch(c, attention_rows_generic<T>, grid, kGenericThreads, 0, a);
  }
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

}  // namespace

size_t attention_scratch_floats(int max_rows, int max_heads, int max_head_dim, int64_t max_context,
                                const PartitionTiers& tiers) {
  // Partials of the decode path only: rows <= kMaxDecodeRows, {m, l} + head_dim floats per partition.
  const int64_t rows = std::min(max_rows, kMaxDecodeRows);
  return static_cast<size_t>(rows * max_heads * max_partition_count(max_context, tiers) *
                             (max_head_dim + 2));
}

namespace {

// The op entry's checks and the kernels' arguments, shared by attention and attention_with_prologue: rows
// <= kMaxDecodeRows take the split-KV decode path (decode set), others the prefill tiles; tuned: the head
// dim and alignments of the tuned kernels.
struct AttentionCall {
  AttentionArgs args;
  bool decode = false, tuned = false, bf16_cache = false;
};

AttentionCall prepare_attention(const Context& c, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out,
                                const L2Prefetch& during) {
  constexpr const char* op = "attention";
  HELIUM_CUDA_REQUIRE(op, shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0);
  HELIUM_CUDA_REQUIRE(op, shape.head_dim > 0 && shape.head_dim <= kGenericMaxHeadDim);
  HELIUM_CUDA_REQUIRE(op, std::isfinite(shape.scale));
  HELIUM_CUDA_REQUIRE(op, q.dtype == DType::F32 && out.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE(op, k_cache.dtype == v_cache.dtype && (k_cache.dtype == DType::BF16 || k_cache.dtype == DType::F32));
  const int64_t q_dim = static_cast<int64_t>(shape.n_heads) * shape.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * shape.head_dim;
  const int64_t rows = rows_of(q);
  HELIUM_CUDA_REQUIRE(op, cols_of(q) == q_dim && rows_of(out) == rows && cols_of(out) == q_dim);
  HELIUM_CUDA_REQUIRE(op, cols_of(k_cache) == kv_dim && cols_of(v_cache) == kv_dim && rows_of(k_cache) == rows_of(v_cache));
  AttentionCall call;
  AttentionArgs& a = call.args;
  a.rows = static_cast<int>(rows);
  if (rows == 0) return call;
  HELIUM_CUDA_REQUIRE(op, q.data != nullptr && out.data != nullptr && k_cache.data != nullptr && v_cache.data != nullptr);
  HELIUM_CUDA_REQUIRE(op, !overlaps(out, q) && !overlaps(out, k_cache) && !overlaps(out, v_cache));
  HELIUM_CUDA_REQUIRE(op, layout.page_size > 0);
  HELIUM_CUDA_REQUIRE(op, layout.block_tables.dtype == DType::I32 && layout.block_tables.rank == 2 &&
                              layout.block_tables.data != nullptr);
  HELIUM_CUDA_REQUIRE(op, layout.row_table.dtype == DType::I32 && layout.row_table.numel() >= rows &&
                              layout.row_table.data != nullptr);
  HELIUM_CUDA_REQUIRE(op, layout.prefix_lens.dtype == DType::I32 && layout.prefix_lens.numel() >= rows &&
                              layout.prefix_lens.data != nullptr);
  const bool tree = layout.tree_masks.data != nullptr;
  HELIUM_CUDA_REQUIRE(op, !tree || (layout.tree_masks.dtype == DType::I64 && layout.tree_masks.numel() >= rows &&
                                    layout.write_slots.dtype == DType::I32 && layout.write_slots.numel() >= rows &&
                                    layout.write_slots.data != nullptr));
  call.decode = rows <= kMaxDecodeRows;

  a.q = q.as<float>();
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  a.out = out.as<float>();
  a.block_tables = layout.block_tables.as<int32_t>();
  a.row_table = layout.row_table.as<int32_t>();
  a.prefix_lens = layout.prefix_lens.as<int32_t>();
  a.tree_masks = tree ? layout.tree_masks.as<int64_t>() : nullptr;
  a.write_slots = tree ? layout.write_slots.as<int32_t>() : nullptr;
  a.n_heads = shape.n_heads;
  a.n_kv_heads = shape.n_kv_heads;
  a.head_dim = shape.head_dim;
  a.group = shape.n_heads / shape.n_kv_heads;
  a.scale = shape.scale;
  a.page_size = layout.page_size;
  a.n_tables = static_cast<int>(layout.block_tables.dim(0));
  a.max_pages = static_cast<int>(layout.block_tables.dim(1));
  a.cache_slots = rows_of(k_cache);
  a.max_keys = std::numeric_limits<int>::max();
  a.trace = nullptr;

  call.bf16_cache = k_cache.dtype == DType::BF16;
  call.tuned = tuned_head_dim(shape.head_dim) && aligned16(q.data) && aligned16(k_cache.data) &&
               aligned16(v_cache.data) && aligned16(out.data);
  if (call.decode) {
    // The grid covers layout.max_keys positions (a host value: a captured graph keeps it), and blocks past
    // a row's keys exit at once. Sizing it from Context::max_context instead would make a 64-row step at
    // short contexts launch 64 x kv_heads x 128 mostly empty blocks per layer.
    HELIUM_CUDA_REQUIRE(op, layout.max_keys > 0);
    a.max_keys = layout.max_keys;
    a.tiers = c.attention_tiers;
    a.evict_first = c.kv_evict_first;
    a.early_kv = c.attention_early_kv;
    a.no_math = (c.omit & kOmitAttnMath) != 0;
    a.merge_early_trigger = layout.max_keys >= c.merge_early_trigger_keys;
    a.partition_late_trigger = layout.max_keys < c.partition_late_trigger_keys;
    a.trace = c.attention_trace;
    // The tuned partition kernel's (the generic one's blocks do not prefetch); only while the step's K/V are
    // short enough that the memory has time to spare.
    if (layout.max_keys <= c.prefetch_attention_max_keys) a.prefetch = during;
    const int64_t parts = max_partition_count(layout.max_keys, a.tiers);
    const int64_t partial_floats = rows * shape.n_heads * parts;
    HELIUM_CUDA_REQUIRE(op, c.attention_scratch != nullptr &&
                                static_cast<size_t>(partial_floats * (shape.head_dim + 2)) <= c.attention_scratch_floats);
    HELIUM_CUDA_REQUIRE(op, merge_smem_bytes(parts, shape.head_dim) <= 48 * 1024);  // merge's shared memory
    a.n_partitions = static_cast<int>(parts);
    // The accumulators first, so that a partition's head_dim floats start 16-byte aligned whatever the row
    // count (the merge reads them four at a time); the (m, l) pairs after them, 8-byte aligned for an even
    // head_dim (the models' configs require one).
    HELIUM_CUDA_REQUIRE(op, shape.head_dim % 2 == 0);
    a.partial_acc = c.attention_scratch;
    a.partial_ml = reinterpret_cast<float2*>(c.attention_scratch + partial_floats * shape.head_dim);
  }
  return call;
}

}  // namespace

bool attention(const Context& c, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out,
               const L2Prefetch& during, __nv_bfloat16* out_split) {
  AttentionCall call = prepare_attention(c, q, k_cache, v_cache, shape, layout, out, during);
  if (call.args.rows == 0) return false;
  if (call.decode) {
    const bool split = out_split != nullptr && !(c.omit & kOmitMerge);  // the merge writes it
    if (split) call.args.out_split = out_split;
    // The clusters merge where the launcher can run them (launch_decode_partition_clusters), else the
    // merge kernel: the same bits.
    call.args.cluster_merge = !(c.omit & kOmitMerge) && call.args.n_partitions >= 2 &&
                              call.args.n_partitions <= std::min(16, c.attention_cluster_merge_max);
    call.args.cluster_trigger_end = c.cluster_merge_trigger_end;
    if (call.bf16_cache) launch_decode<bf16>(c, call.args, call.tuned);
    else launch_decode<float>(c, call.args, call.tuned);
    return split;
  }
  if (call.bf16_cache) launch_prefill<bf16>(c, call.args, call.tuned);
  else launch_prefill<float>(c, call.args, call.tuned);
  return false;
}

bool attention_with_prologue(const Context& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                             const Tensor& k_norm, float eps, const Tensor& positions, const Tensor& inv_freq,
                             const RopeParams& rope, const Tensor& k_cache, const Tensor& v_cache,
                             const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out,
                             const L2Prefetch& during, __nv_bfloat16* out_split, bool* wrote_split) {
  if (wrote_split != nullptr) *wrote_split = false;
  const int64_t rows = rows_of(q);
  if (c.attention_fused == Context::kFusedOff || (c.omit & (kOmitPrologue | kOmitAttention)) != 0 || rows == 0 ||
      rows > kMaxDecodeRows ||
      c.attention_counters == nullptr || layout.write_slots.data == nullptr || rope.head_dim != shape.head_dim)
    return false;
  const char* op = "qk_norm_rope_attention";
  // qk_norm_rope_kv_write's checks, then attention's (prepare_attention).
  HELIUM_CUDA_REQUIRE(op, q.dtype == DType::F32 && k.dtype == DType::F32 && v.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE(op, positions.dtype == DType::I32 && inv_freq.dtype == DType::F32 &&
                              layout.write_slots.dtype == DType::I32);
  HELIUM_CUDA_REQUIRE(op, rope.rot_dim > 0 && rope.rot_dim % 2 == 0 && rope.rot_dim <= rope.head_dim);
  HELIUM_CUDA_REQUIRE(op, (q_norm.data == nullptr) == (k_norm.data == nullptr));
  HELIUM_CUDA_REQUIRE(op, q_norm.data == nullptr || (q_norm.numel() == rope.head_dim && k_norm.numel() == rope.head_dim &&
                                                     q_norm.dtype == k_norm.dtype));
  const int64_t kv_dim = int64_t{shape.n_kv_heads} * shape.head_dim;
  HELIUM_CUDA_REQUIRE(op, positions.numel() == rows && layout.write_slots.numel() >= rows &&
                              inv_freq.numel() == rope.rot_dim / 2);
  HELIUM_CUDA_REQUIRE(op, k.numel() == rows * kv_dim && v.numel() == rows * kv_dim);
  if (!aligned16(k.data) || !aligned16(v.data)) return false;  // the blocks copy their heads in 16-byte pieces
  AttentionCall call = prepare_attention(c, q, k_cache, v_cache, shape, layout, out, during);
  if (!call.tuned) return false;
  // Every row's (row, head group) counter must exist: the grid's x extent is n_kv_heads · passes.
  const int groups = shape.n_heads / decode_heads_per_block(shape.n_heads / shape.n_kv_heads);
  if (int64_t{groups} * rows > c.attention_counter_count) return false;
  // A grid of several waves stays with the two kernels unless every grid is asked for: there the fused
  // kernel lost most (H200, Qwen3-8B shape, 32K: 147.8-155.8 tok/s against 164.2; docs/benchmarks.md,
  // thirteenth session).
  const int64_t blocks = int64_t{groups} * call.args.n_partitions * rows;
  if (c.attention_fused == Context::kFusedOneWave &&
      (c.sm_count <= 0 || blocks > int64_t{kDecodeBlocksPerSm} * c.sm_count))
    return false;
  AttentionArgs& a = call.args;
  a.write_slots = layout.write_slots.as<int32_t>();
  FusedPrologue& f = a.fused;
  f.k = k.as<float>();
  f.v = v.as<float>();
  f.k_cache = k_cache.data;
  f.v_cache = v_cache.data;
  f.q_norm = q_norm.data;
  f.k_norm = k_norm.data;
  f.norm_dtype = q_norm.dtype;
  f.eps = eps;
  f.positions = positions.as<int32_t>();
  f.inv_freq = inv_freq.as<float>();
  f.half = rope.rot_dim / 2;
  f.rope_scaling = rope.attention_scaling;
  f.counters = c.attention_counters;
  f.own_slots = static_cast<int>(rows) + 1;
  f.merge = a.n_partitions <= std::min(c.attention_fused_merge_max_partitions, fused_merge_max_partitions(decode_ring(c, a)));
  f.early_trigger = c.attention_fused_early_trigger;
  // The merge kernel writes o_proj's split (the merge in the fused kernel's last blocks does not).
  const bool split = out_split != nullptr && !f.merge && !(c.omit & kOmitMerge);
  if (split) a.out_split = out_split;
  if (wrote_split != nullptr) *wrote_split = split;
  if (call.bf16_cache) launch_decode<bf16, true>(c, a, true);
  else launch_decode<float, true>(c, a, true);
  return true;
}

}  // namespace helium::cuda
