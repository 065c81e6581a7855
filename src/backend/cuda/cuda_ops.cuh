// backend/cuda/cuda_ops.cuh — what the op files share: the launch context, the per-op launchers that
// CudaBackend calls, and the error check. Included by .cu files only.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention_partitions.h"
#include "backend/cuda/matmul_scratch.h"

// A CUDA call that fails inside an op cannot return a Status (ops are void and asynchronous): it aborts
// with the call, file and line. Errors at load time are returned as Status by CudaBackend.
#define HELIUM_CUDA_CHECK(expr)                                                                       \
  do {                                                                                                \
    cudaError_t helium_err_ = (expr);                                                                 \
    if (helium_err_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "helium: CUDA error %s at %s:%d: %s\n", cudaGetErrorString(helium_err_),   \
                   __FILE__, __LINE__, #expr);                                                        \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (0)

// Precondition checks at op entry (host side), like the CPU backend's: abort naming the op.
#define HELIUM_CUDA_REQUIRE(op, cond)                                                                 \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      std::fprintf(stderr, "helium: cuda %s: check failed: %s (%s:%d)\n", op, #cond, __FILE__, __LINE__); \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (0)

namespace helium::cuda {

struct MatmulDecodeTable;  // matmul.cu's tuned decode configurations (below)
struct StreamQueue;        // matmul.cu's queued layer-stream phases (Context::stream_queue)

// select_candidates cuts a row into this many chunks (top_k up to Backend::kMaxSelectTopK needs as many).
inline constexpr int kSelectChunks = 256;
static_assert(kSelectChunks >= Backend::kMaxSelectTopK);
// select_candidates' softmax totals: a row's terms summed per group of kSelectSumIds ids (the second level
// of core/softmax_terms.h's tree), at most kSelectSumGroups groups a row.
inline constexpr int kSelectSumIds = 4096;
inline constexpr int kSelectSumGroups = 256;

// Everything a launcher may use; owned by CudaBackend and reserved at creation.
struct Context {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;  // for cuBLASLt
  size_t lt_workspace_bytes = 0;
  float* attention_scratch = nullptr;  // split-KV partial results
  size_t attention_scratch_floats = 0;
  void* matmul_scratch = nullptr;  // e.g. bf16 copies of activations for large-M GEMMs
  unsigned long long* argmax_keys = nullptr;  // argmax_rows' per-row keys
  int32_t* select_scratch = nullptr;  // select_candidates' chunk keys and counts: 2 · kMaxDecodeRows · kSelectChunks
  double* select_sums = nullptr;      // select_candidates' group sums: kMaxDecodeRows · kSelectSumGroups
  int argmax_capacity = 0;                    // rows argmax_keys holds
  size_t matmul_scratch_bytes = 0;
  // Bytes of one decode split region of matmul_scratch (matmul_split_region_bytes; 0: no norm handoff).
  size_t matmul_split_region = 0;
  const MatmulDecodeTable* matmul_decode_table = nullptr;  // tuned decode configs; null: defaults
  int sm_count = 0;
  // Programmatic dependent launch (sm_90+, unless HELIUM_CUDA_PDL=0): each kernel may be scheduled while
  // the one before it drains, and waits in pdl_wait() for its results.
  bool pdl = false;
  int max_rows = 0;
  int64_t max_context = 0;
  // Decode attention's partition thresholds (attention_partitions.h); HELIUM_CUDA_ATTN_PARTITIONS=a,b[,c]
  // overrides them at backend creation (0,0,1000000: 256-key partitions everywhere), for comparisons.
  PartitionTiers attention_tiers;
  // Decode attention's K/V ring (attention.cu, Ring): kRingShort, partitions of up to 128 keys, five 8 KB
  // stages; kRingWide, partitions of up to 512 keys, as many 8 KB stages as fit four blocks per
  // multiprocessor. kRingAuto takes the short one when every partition fits it; HELIUM_CUDA_ATTN_RING=wide
  // forces the wide one, for comparisons. The same bits either way.
  enum AttentionRing { kRingAuto, kRingWide };
  AttentionRing attention_ring = kRingAuto;
  // Diagnostic only (HELIUM_CUDA_ATTN_SMEM_PAD_KB): unused bytes added to each decode partition block's
  // shared memory, to tell a block's footprint from its ring in a comparison.
  size_t attention_smem_pad = 0;
  // Decode attention grids with fewer blocks than four per multiprocessor spread over the device
  // (attention.cu, decode_block_smem) unless HELIUM_CUDA_ATTN_SPREAD=off. The same bits either way.
  bool attention_spread = true;
  // Weights in the decode matmul are read once per step: loaded with the L2 evict_first policy, they leave
  // the cache to what is read again (activations, keys and values). On unless HELIUM_CUDA_STREAM_POLICY=normal
  // (cuda_backend.cu has the measurement).
  bool stream_evict_first = true;
  // The same for decode attention's keys and values: on unless HELIUM_CUDA_KV_POLICY=normal.
  bool kv_evict_first = true;
  // The tensor-core decode matmul's weights under stream_evict_first's policy too: off unless
  // HELIUM_CUDA_MMA_EVICT_FIRST=on — with this toolkit the hinted copies raised "illegal instruction" in
  // that kernel (docs/benchmarks.md, eleventh session), so it loads its weights unhinted.
  bool mma_evict_first = false;
  // Decode attention loads the keys and values the step does not write (all but the last `rows` positions
  // of each prefix) before it waits for the previous kernel, the q/k prologue that writes the step's own
  // keys; off (HELIUM_CUDA_ATTN_EARLY=off): every load after the wait, for comparisons.
  bool attention_early_kv = true;
  // Decode attention with the q/k prologue in its partition kernel (attention_with_prologue: per-head q/k
  // norms, RoPE and the K/V cache write done by the attention blocks themselves, no prologue kernel before
  // them), for grids resident in one wave (kFusedOneWave) or every grid (kFusedAll); kFusedOff: the two
  // kernels. HELIUM_CUDA_ATTN_FUSED=on|all|off. The same bits either way. Off by default: in the decode
  // graph it was slower on the H200 (Qwen3-8B shape, 256 tokens, one machine, two rounds: 1K 185.2 /
  // 185.5 tok/s against 213.5 / 213.7 off, 8K 194.5 / 194.1 against 206.3 / 205.9; late trigger 187.9 /
  // 197.3; docs/benchmarks.md, thirteenth session), and with its prologue rebuilt still on an H100 (1K
  // 155.7, 167.6 with the merge kernel, 169.0 with the late trigger too, against 176.5 off; fortieth
  // session). Its code was most of that: rolled ring loops, one out-of-line rotary angle and one prologue
  // copy (10,408 to 8,528 SASS instructions) brought it to 178.4 with the merge kernel against 181.0 /
  // 181.6 off, and with the late trigger too to 180.1 / 180.2 at 1K and 167.8 at 8K against 181.6 / 182.0
  // and 170.4 off (H100, forty-first session); its blocks' phases after the first chunk are now no slower
  // than the two kernels'. What is left is its wait-to-first-chunk, 2.3 µs against 0.8, which neither
  // reading the query into registers without a copy group nor issuing the K/V loads earlier shortened.
  enum FusedAttention { kFusedOff, kFusedOneWave, kFusedAll };
  FusedAttention attention_fused = kFusedOff;
  // With the prologue fused, the last partition block of each (row, head group) also merges the partials
  // when a row has at most this many partitions (the merge kernel otherwise): one block then reads all of
  // its heads' partials, which pays while they are few. HELIUM_CUDA_ATTN_FUSED_MERGE=N (0..128, 0: never).
  int attention_fused_merge_max_partitions = 32;
  // The fused kernel lets the next kernel launch at its start (true) or once a block has consumed its
  // K/V (false; HELIUM_CUDA_ATTN_FUSED_TRIGGER=start|late).
  bool attention_fused_early_trigger = true;
  // (kMaxDecodeRows · max_heads) counters of finished partitions, zero between launches (the merging
  // block resets its own): reserved and zeroed at creation.
  int* attention_counters = nullptr;
  int64_t attention_counter_count = 0;
  // Norm handoffs between decode matmuls (NormHandoff; Backend::prepare_norm): on unless
  // HELIUM_CUDA_NORM_HANDOFF=off.
  bool norm_handoff = true;
  // Decode attention's merge writes the split of its output for o_proj (attention_split_slot), which o_proj's
  // tensor-core matmul reads with no split kernel between them: on unless HELIUM_CUDA_ATTN_SPLIT=off. The
  // same bits either way.
  bool attention_split = true;
  // The q/k/v projection of decode rows does the attention prologue in its stores (rms_norm_qkv_prologue:
  // the last item stored of each head normalises, rotates and caches it; no prologue kernel) with
  // HELIUM_CUDA_QKV_PROLOGUE=on. The same bits either way. Off by default: on the H200 (Qwen3-8B shape,
  // 256 tokens, two rounds on one machine) it decoded 211.8 / 211.8 tok/s at 1K against 215.5 / 213.8
  // with the prologue kernel, 194.1 / 194.2 against 199.8 / 199.8 at 8K, 173.3 / 173.1 against 174.2 /
  // 174.2 at 32K (another machine: +0.8% at 1K; docs/benchmarks.md, nineteenth session).
  // prologue_counts: one counter per head (q, k and v heads of a row group), zero between launches (the
  // head's last item resets its own); reserved and zeroed at creation, prologue_count_capacity of them.
  bool qkv_prologue = false;
  int* prologue_counts = nullptr;
  int prologue_count_capacity = 0;
  // Diagnostic only (HELIUM_CUDA_OMIT, cuda_backend.cu): kernels of a decode step that are not launched, so
  // that a benchmark can time what each costs inside the replayed graph. The results are garbage.
  unsigned omit = 0;
  // The decode matmul lets the next kernel launch (programmatic dependent launch) right after its first
  // weight rounds are issued, not after its last: the next kernel's blocks take what the matmul's leave of
  // the multiprocessors and issue their own independent loads early. HELIUM_CUDA_MATMUL_TRIGGER=end for
  // the old order (cuda_backend.cu has the measurement).
  bool matmul_early_trigger = true;
  // The q/k prologue kernel lets decode attention's partition kernel launch at its start (true), so that the
  // partition blocks become resident as the q/k/v projection's blocks leave and issue their early K/V loads
  // in its tail, or after its wait (false). HELIUM_CUDA_PROLOGUE_TRIGGER=start|wait. On the H200 (Qwen3-8B
  // shape, 256 tokens, two rounds; docs/benchmarks.md, twenty-first session): 215.4 / 216.2 tok/s at 1K
  // against 214.7 / 213.9, 174.3 / 174.2 at 32K against 173.0 / 172.4.
  bool prologue_early_trigger = true;
  // The attention merge lets the next kernel (o_proj, or its split kernel without attention_split) launch
  // at its start, not after its wait, when the step's longest row has at least this many keys (INT_MAX:
  // never): o_proj's blocks then take the multiprocessors the partition blocks leave and issue their first
  // weight rounds in the partitions' tail. In a recorded decode graph the longest row is the graph's
  // power-of-two key bucket (dense_transformer.cpp): the benchmark's 8K steps (the 16K bucket) have it too.
  // HELIUM_CUDA_MERGE_TRIGGER_KEYS=N. At 1K it let o_proj's early weight traffic slow the
  // latency-bound attention (docs/benchmarks.md, eighth session); from 16K keys (the 512-key partitions'
  // one long wave) it paid on the H200 with the one-row matmul instance at 6 stages (Qwen3-8B shape, 32K,
  // 256 tokens, two rounds: 178.3 / 177.4 tok/s against 175.9 / 176.1 without it; docs/benchmarks.md,
  // twenty-first session, call 2), not with o_proj's blocks at 8 stages (173.8 / 173.7, the same call).
  int merge_early_trigger_keys = 16384;
  // Decode attention's partition kernel (without the prologue) lets the merge launch only once each block's
  // K/V loads have landed, instead of at its start, when the step's longest row has fewer keys than this
  // (0: never; HELIUM_CUDA_PARTITION_LATE_KEYS=N). A recorded decode graph's max_keys is a power-of-two
  // bucket of its longest row (dense_transformer.cpp): 2,048 for the benchmark's 1K steps, 16,384 for its 8K
  // steps, the context (33,296) for its 32K steps. On the H200 (Qwen3-8B shape, 256 tokens, two rounds;
  // docs/benchmarks.md, twenty-second session): below 16,384 (1K late, 8K not) 228.95 / 229.85 tok/s at 1K
  // against 226.24 / 226.11 triggering at the start (call 3); below 65,536 (every context late) 207.97 /
  // 207.88 at 8K against 204.60 / 204.30 and 180.35 / 180.74 at 32K against 184.29 / 183.95 (call 4). So
  // late up to the 16K bucket, at the start beyond, where the merge's early trigger (from 16K keys) has
  // o_proj's blocks take the multiprocessors the partitions leave. In the 32,768 bucket (rows of 16K-32K keys)
  // late gained 1.9% at 20K and lost 2% at 32K (twenty-third session, call 3): the bucket stays at the start.
  int partition_late_trigger_keys = 32768;
  // Decode attention merges a row's partitions inside the partition kernel when every row of the step has
  // at most this many (2..16; 0 or 1: never; HELIUM_CUDA_CLUSTER_MERGE=N; sm_90 only): the grid is launched
  // in clusters of one (row, head group)'s partition blocks, each block keeps its partials in its shared
  // memory, and after a cluster barrier each block merges a slice of the group's outputs from its peers'
  // shared memory (distributed shared memory) with the merge kernel's arithmetic — no merge kernel, no
  // partials in global memory. A recorded decode graph's max_keys is its power-of-two key bucket: up to the
  // 2,048 bucket a row has at most 16 partitions (64 keys up to 1K, 128 up to 4K). The same bits either way.
  // Off by default: on the H200 (Qwen3-8B shape, 1K, 256 tokens, two rounds; docs/benchmarks.md,
  // twenty-third session) the clusters decoded at 222.72 / 222.88 tok/s against the merge kernel's 225.95 /
  // 226.23 (o_proj launched once the K/V landed), 220.81 / 221.65 against 229.60 / 228.54 (at the end), and
  // attention alone took 11.5 µs either way: the cluster barriers cost what the kernel boundary did.
  int attention_cluster_merge_max = 0;
  // Where a cluster-merged partition kernel with the late trigger (partition_late_trigger_keys) lets o_proj
  // launch: at its end, after the merge (true), or once each block's K/V loads have landed, as the merge
  // kernel's partitions do (false; HELIUM_CUDA_CLUSTER_TRIGGER=end|loads).
  bool cluster_merge_trigger_end = true;
  // Decode attention launches whose clusters merged (for tests and CudaBackend::attention_cluster_merge_count).
  mutable int64_t attention_cluster_merges = 0;
  // One-row launches of the tensor-core decode matmul take its one-row instance (a stage of 2,304 bytes:
  // x's two split rows only, so more blocks fit a multiprocessor) with this many stages per warp ring (6, 7
  // or 8; 0: the tuned depth on the four-row instance). HELIUM_CUDA_MMA_ONE_ROW=0|6|7|8. The same bits
  // either way. 6, 7 and 8 stages all ran three blocks on an H200 multiprocessor (mma_one_row_blocks; the
  // measurements below were taken so, though this comment said four for 6 stages), the four-row instance's
  // 8 two. There (Qwen3-8B shape, 256 tokens, two rounds; docs/benchmarks.md, twenty-first session), with
  // the merge's early trigger at 32K: 6 stages 224.9 / 223.2 tok/s at 1K, 183.6 / 182.1 at 32K; 8 stages
  // where every item has a block, else 6: 222.1 / 221.9 and 179.7 / 179.4; 8 stages (without the merge's
  // trigger) 223.9 / 223.9 and 176.6 / 176.4; the four-row instance (and the prologue triggering after
  // its wait) 204.8 / 204.7 and 171.1 / 171.0. Deeper one-row rings at two blocks a multiprocessor (10, 12
  // stages) ran slower than the four-row instance (call 1: 209.6 and 203.3 at 1K against 214.7).
  int mma_one_row_stages = 6;
  // o_proj after decode attention (one row, x the merge's split) on the one-row instance with this many
  // stages (10, 12 or 16; 0: mma_one_row_stages and its spread), at the residency its shared memory gives
  // (10 stages, 94 KB: two blocks a multiprocessor, or one beside a 1K step's spread partition block): its
  // blocks, launched as the merge triggers (merge_early_trigger_keys), fill nine stages a warp with o_proj's
  // weights before their wait (five at 6 stages), while the latency-bound attention chain leaves the memory
  // idle (every one-row matmul at 10 or 12 stages lost, above; o_proj alone gains). HELIUM_CUDA_OPROJ_STAGES=
  // 0|10|12|16. The same bits either way. On an H100 (Qwen3-8B shape, 256 tokens, tok/s, pairs back to back;
  // docs/benchmarks.md, thirty-fifth session) 10 / 0: 1K 181.57 / 180.52, 181.38 / 180.52, 181.40 / 180.70,
  // 8K 170.06 / 169.49, 170.19 / 169.45, 170.34 / 169.60, 32K 141.79 / 142.22 and 141.87; 12 stages (112 KB,
  // no longer beside the partition block) 180.2 at 1K; with the partitions triggering at their start
  // (so that o_proj launches before the K/V land) 174.2. On an H200 (forty-fourth session, the same
  // command, 1K / 8K / 32K) 10 / 0: 231.10 / 230.74, 211.03 / 211.40, 179.49 / 178.08; 229.88 / 230.94,
  // 209.76 / 212.04, 178.30 / 178.04; 229.19 / 231.99, 210.21 / 212.72, 178.47 / 178.51 — the deep ring
  // loses 0.6% at 1K and 0.8% at 8K there. So this is the depth before tuning: the attention tuner
  // (CudaBackend::tune_attention) times the chain at its fewest keys with 0 and 10 and keeps the faster past
  // a tie (cuda::choose_oproj_stages), cached per GPU; HELIUM_CUDA_OPROJ_STAGES set by hand is not tuned.
  int oproj_stages = 10;
  // The one-row instance's blocks per multiprocessor, at most (matmul.cu, one_row_block_smem pads a block's
  // shared memory to hold it there; HELIUM_CUDA_MMA_BLOCKS=1..4). Three: on the H200 (Qwen3-8B shape, 256
  // tokens, two rounds; docs/benchmarks.md, twenty-fourth session) four blocks of 6 stages decoded 211.62 /
  // 211.48 tok/s at 1K against 226.25 / 226.26 with three (8K 193.4 against 205.5-205.8, 32K 169.5-169.6
  // against 178.8-179.0), the layer's four matmuls 114.7 µs against 107.0. (Until then they ran three,
  // though the comment above said four: the kernel's static row-scale array or the default L1 carveout held
  // them there; the change that let four fit removed the one and set the other, not separated.)
  int mma_one_row_blocks = 3;
  // And where a one-row launch has fewer items than that many blocks per multiprocessor, ceil(items /
  // multiprocessors) blocks each (the scheduler would pack them); HELIUM_CUDA_MMA_SPREAD=on|off. On the
  // H200 (the same benchmark, two rounds) 230.59 / 230.14 tok/s at 1K against 224.06 / 226.09 with three
  // everywhere, 208.73 / 207.33 against 203.91 / 205.23 at 8K, 180.31 / 179.35 against 178.64 / 178.26 at
  // 32K; down (256 items, two blocks a multiprocessor) alone 26.60 µs against 31.63.
  bool mma_spread = true;
  // The spread for launches of row groups of 4, 8 and 16 (batched decode, tree verification): ceil(items /
  // multiprocessors) blocks a multiprocessor where fewer than fit (o_proj and down at 8 rows: two instead of
  // three). HELIUM_CUDA_MMA_SPREAD_ROWS=on|off. Residency only, the same bits. On an H100 (Qwen3-8B shape,
  // `helium_bench_decode --batch N --contexts 1024`, tok/s of all rows; docs/benchmarks.md, twenty-eighth
  // session) off / on: 8 rows 1,141.0 / 1,158.9 and 1,144.4 / 1,159.3, 16 rows 1,770.5 / 1,777.5, 32 rows
  // 2,004.2 / 2,009.9; twenty-ninth session 8 rows 1,145.6 / 1,158.3 and 1,142.8 / 1,155.3, 16 rows 1,767.2 /
  // 1,773.0 and 1,775.7 / 1,779.2, 32 rows 1,989.4 / 1,984.2. Not yet timed on an H200.
  bool mma_spread_rows = true;
  mutable int64_t mma_spread_rows_launches = 0;  // launches it padded (for tests)
  // Launches on the x-shared tensor-core kernel (matmul.cu, matmul_mma_xs_kernel: a block of W warps takes W
  // 16-feature tiles of G row groups, one copy of x's split a stage for all of them, instead of a copy per
  // warp): 0 off; kXSharedTuned (the default) per shape, launches of at least the row groups of 16 from which
  // the start-up tuner timed it faster on this GPU (MatmulDecodeShapeConfig::x_shared_from_groups, tune.cpp),
  // and for a shape the tuner has not timed the wide rule; kXSharedWide launches of more than 32 rows (three
  // or four row groups of 16); both with W and G by the launch's items; -1 (auto) every launch of row groups
  // of 16 (9-64 rows), W by its items; 1 / 2 / 4 that many tiles a block, launches of 5-64 rows.
  // HELIUM_CUDA_MMA_XSHARED=off|tuned|wide|auto|1|2|4. The same bits as the default kernel (cuda_matmul_test).
  // Where it pays (H100, batched decode at 1K, thirty-second session, docs/benchmarks.md): with G up to 4 the
  // weights stream once for 33-64 rows instead of three or four times, +15-34% there (64 rows 1,988 -> 2,620
  // tok/s, 33 rows 1,421 -> 1,666); at 32 rows (G = 2) 1,935 -> 1,887 and at 16 (G = 1) 1,728 -> 1,017: the
  // wide rule, which the tuner's timings replace per shape and GPU. mma_x_shared_stages: its ring depth (4, 8,
  // 12 or 16; 0: the deepest that keeps ceil(items / multiprocessors) blocks a multiprocessor), for tests.
  static constexpr int kXSharedWide = -2;
  static constexpr int kXSharedTuned = -3;
  int mma_x_shared = kXSharedTuned;
  int mma_x_shared_stages = 0;
  mutable int64_t mma_x_shared_launches = 0;  // (for tests)
  // Row groups of 16 a block of the x-shared kernel (1, 2 or 4; 0, the default: as many as the launch has,
  // up to 4): warp (t, g) of W · G takes tile t for row group g, so one stage's weights serve G row groups —
  // at 64 rows the weights are streamed once, not four times (the L2 then delivers 3 bytes a weight byte at
  // W = 4, not 6 or 12). HELIUM_CUDA_MMA_XSHARED_GROUPS=auto|1|2|4. The same bits (cuda_matmul_test).
  int mma_x_shared_groups = 0;
  mutable int64_t mma_x_shared_grouped_launches = 0;  // launches with G > 1 (for tests)
  // Diagnostic only (helium_bench_cuda_matmul --chain): when set, each block of a decode matmul writes
  // kMatmulTraceEvents %globaltimer stamps to matmul_trace[block · kMatmulTraceEvents + event] (matmul.cu).
  unsigned long long* matmul_trace = nullptr;
  // Diagnostic only (helium_bench_cuda_attention --trace): when set, each block of the decode partition
  // kernel writes kAttentionTraceEvents %globaltimer stamps to attention_trace[block · events + event]
  // (a block past its row's keys only the first).
  unsigned long long* attention_trace = nullptr;
  // CudaBackend::swiglu_mlp_add's decode path: the gate/up matmul stores the activation (on) or the two
  // fused ops of the default sequence run (off; HELIUM_CUDA_SWIGLU_STORE, for comparisons). Same bits.
  bool swiglu_store = true;
  // The smallest x tile of the decode matmul in bytes (HELIUM_CUDA_XTILE_KB, for comparisons; 0: 16 KB).
  int64_t x_tile_min_bytes = 0;
  // The most bytes of a hinted weight (Backend::prefetch: o_proj's) that decode attention's partition blocks
  // pull into the L2 once their own K/V have landed, when the step's longest row has at most
  // prefetch_attention_max_keys keys. 0: none. HELIUM_CUDA_PREFETCH_ATTN_MB / _KEYS override them.
  int64_t prefetch_attention_bytes = 0;
  int64_t prefetch_attention_max_keys = 8192;
  // The layer stream (matmul.cu, matmul_stream_kernel): while stream_enqueue is set (CudaBackend sets it
  // for the duration of its matmul ops), one-row decode matmuls on the tensor-core order are queued instead of
  // launched, and the queue goes out as one persistent launch when any other kernel is launched (launch()
  // flushes it first) or the backend flushes it (flush_stream: copies, synchronisation, the end of a capture).
  // The same bits as the kernel-per-op launches. Null (no queue): off — before sm_90, and unless
  // HELIUM_CUDA_STREAM=on. stream_counters: its grid-wide counters, zero between launches.
  StreamQueue* stream_queue = nullptr;
  bool stream_enqueue = false;
  int* stream_counters = nullptr;
  // Diagnostic only (HELIUM_CUDA_STREAM_DIAG=0|1|2, matmul.cu's StreamParams::diag; 1: garbage results,
  // 2: a printed timeline).
  int stream_diag = 0;
  // k of one stage of the layer stream's ring, in units of 256 (HELIUM_CUDA_STREAM_STAGE_K=256|512|1024).
  int stream_reps = 1;
  // Prefill matmuls stage x once per fused op (norm or SwiGLU applied while rounding it for cuBLASLt, the
  // residual added in the GEMM's epilogue) unless HELIUM_CUDA_PREFILL_FUSED=off (matmul.cu, prefill_fused).
  bool prefill_fused = true;
};
// Decode partition kernel stamps: start, slots staged, wait released, first chunk landed, K phase done,
// softmax done, V phase done, partials written.
inline constexpr int kAttentionTraceEvents = 8;
enum OmitBits : unsigned {
  kOmitQkv = 1u << 0,        // rms_norm_matmul_split into three outputs
  kOmitGateUp = 1u << 1,     // rms_norm_matmul_split into two
  kOmitLmHead = 1u << 2,     // rms_norm_matmul_split into one
  kOmitO = 1u << 3,          // matmul_add
  kOmitDown = 1u << 4,       // swiglu_matmul_add
  kOmitPrologue = 1u << 5,   // qk_norm_rope_kv_write
  kOmitAttention = 1u << 6,  // decode attention's partition kernel
  kOmitMerge = 1u << 7,      // decode attention's merge kernel
  kOmitAttnMath = 1u << 8,   // decode attention's arithmetic (its K/V loads stay): the streaming alone
};

// The GPU's global nanosecond clock (%globaltimer), for the diagnostic timelines (Context::matmul_trace,
// Context::attention_trace, the layer stream's StreamParams::diag).
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every kernel starts with this: under programmatic dependent launch it blocks until the previous
// kernel in the stream has finished and its writes are visible (a no-op otherwise and before sm_90).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next kernel in the stream be scheduled before this one exits (its pdl_wait() still waits
// for this grid to finish): called once a block has issued its last loads.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches the queued layer-stream phases, if any (Context::stream_queue; matmul.cu).
void flush_stream(const Context& c);
// The queue's storage: made with the backend, freed with it.
StreamQueue* make_stream_queue();
void free_stream_queue(StreamQueue* q);
// Counters the layer stream needs (zeroed by the caller before the first launch).
int stream_counter_count();
// Phases and launches the queue has sent (CudaBackend::layer_stream_counts).
void stream_queue_counts(const StreamQueue* q, int64_t& phases, int64_t& launches);

// Launches every kernel of the backend on the context's stream, as a programmatic dependent launch when
// c.pdl is set. The kernel must begin with pdl_wait(). Queued layer-stream phases go first.
template <class... Params, class... Args>
void launch(const Context& c, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, Args&&... args) {
  if (c.stream_queue != nullptr) flush_stream(c);
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = c.stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = c.pdl ? 1 : 0;
  HELIUM_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// The current device's shared-memory limits: per multiprocessor, reserved per block, a block's opt-in
// maximum. Read from the driver once per device (the residency helpers below run at every decode launch).
struct SmemLimits {
  int per_sm = 0, reserved = 0, block_max = 0;
};
inline SmemLimits smem_limits() {
  static std::mutex mutex;
  static std::map<int, SmemLimits> read;
  int device = 0;
  HELIUM_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto [it, fresh] = read.try_emplace(device);
  if (fresh) {
    HELIUM_CUDA_CHECK(cudaDeviceGetAttribute(&it->second.per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    HELIUM_CUDA_CHECK(cudaDeviceGetAttribute(&it->second.reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
    HELIUM_CUDA_CHECK(cudaDeviceGetAttribute(&it->second.block_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  }
  return it->second;
}
// A block's shared memory for at most `per_sm` blocks a multiprocessor: `need`, or more where per_sm + 1
// blocks of `need` (and the per-block reservation) would fit — padded to the bound at which they overflow,
// plus `margin` bytes, a multiple of 16 (decode attention's spread grids and the one-row decode matmul).
inline size_t smem_for_residency(int64_t per_sm, size_t need, int64_t margin) {
  const SmemLimits l = smem_limits();
  const int64_t bound = (int64_t{l.per_sm} / (per_sm + 1) - l.reserved + margin + 15) / 16 * 16;
  return static_cast<size_t>(std::min<int64_t>(l.block_max, std::max<int64_t>(static_cast<int64_t>(need), bound)));
}

// "Rows" = product of all but the last dimension; "cols" = the last dimension.
inline int64_t rows_of(const Tensor& t) { return t.rank == 0 ? 0 : t.numel() / t.shape[t.rank - 1]; }
inline int64_t cols_of(const Tensor& t) { return t.rank == 0 ? 0 : t.shape[t.rank - 1]; }

// sources (rows) I32 or empty: row r's id is previous[sources[r]] where sources[r] >= 0, else ids[r].
void embedding(const Context& c, const Tensor& table, const Tensor& ids, const Tensor& sources, const Tensor& previous,
               const Tensor& out);
void matmul(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);
void matmul_split(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys);
// Weight ranges a decode kernel pulls into the L2 for a later kernel (Backend::prefetch): the start of
// each, split evenly over the kernel's blocks, one warp of each issuing 4 KB bulk prefetches (sm_90; none
// before). Two ranges for a stacked gate/up weight, read from the start of both halves. Performance only:
// nothing waits for them, and the reader loads the same bytes either way.
struct L2Prefetch {
  const void* data[2] = {nullptr, nullptr};
  int64_t bytes[2] = {0, 0};  // multiples of 16
  __host__ __device__ bool empty() const { return bytes[0] == 0 && bytes[1] == 0; }
};
// The first `cap` bytes of w read by an op that walks its `stacked` equal row blocks side by side (1 or 2).
L2Prefetch l2_prefetch_of(const Tensor& w, int stacked, int64_t cap);

// Block `block` of `blocks` issues its share of pf; called by one whole warp.
__device__ __forceinline__ void l2_prefetch_share(const L2Prefetch& pf, int64_t block, int64_t blocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int64_t kPiece = 4096;
  const int lane = static_cast<int>(threadIdx.x & 31);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t bytes = pf.bytes[r];
    if (bytes == 0) continue;
    const int64_t share = ((bytes + blocks - 1) / blocks + kPiece - 1) / kPiece * kPiece;
    const int64_t end = min(bytes, (block + 1) * share);
    for (int64_t off = block * share + lane * kPiece; off < end; off += 32 * kPiece) {
      const uint32_t size = static_cast<uint32_t>(min(kPiece, end - off));
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(static_cast<const char*>(pf.data[r]) + off),
                   "r"(size)
                   : "memory");
    }
  }
#else
  (void)pf;
  (void)block;
  (void)blocks;
#endif
}

// A norm handoff between two decode matmuls on the tensor-core kernel (Backend::prepare_norm): the op that
// adds into the residual stream x (matmul_add, the MLP's down) also writes what the next op's RMSNorm
// matmul needs — the BF16 split of x · w' (w' the norm's weight, 1 + w when zero-centred) and each 16
// features' sum of squares of x — and that matmul multiplies its outputs by the row's scale rsqrt(Σ x² /
// k + eps) at its store, before the bias: no split kernel between the two. Not bitwise the unfused
// sequence (the scale is applied after the products instead of before them); the same bits for a row
// whatever the batch. split and sq point into matmul_scratch (norm_handoff_slot).
struct NormHandoff {
  Tensor norm_w;  // (n)
  bool zero_centred = false;
  __nv_bfloat16* split = nullptr;  // (2 · rows, n): row 2r hi, 2r + 1 lo
  float* sq = nullptr;             // (rows, ceil(n / 16))
};
// The handoff's place in Context::matmul_scratch (after x's split and the MLP activation's), or one with
// null pointers when the scratch has none for rows × n.
NormHandoff norm_handoff_slot(const Context& c, int64_t rows, int64_t n);
// Where decode attention's merge writes the split of its output for o_proj (attention's out_split): x's
// split region of Context::matmul_scratch, which o_proj's split kernel would write; null when the scratch
// has no room for rows × n.
__nv_bfloat16* attention_split_slot(const Context& c, int64_t rows, int64_t n);
// With next (a slot of norm_handoff_slot), also writes the handoff for x = y; true when it did (decode rows
// on the tensor-core kernel with a BF16 w), false when y holds only the sum. presplit: x's split, already
// written (attention_split_slot), which the tensor-core kernel then reads instead of splitting x (the same
// bits); other paths read x. took_presplit (optional): whether the launch read presplit.
bool matmul_add(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& scratch,
                const Tensor& y, const NormHandoff* next = nullptr, const __nv_bfloat16* presplit = nullptr,
                bool* took_presplit = nullptr);
void rms_norm(const Context& c, const Tensor& x, const Tensor& w, float eps, bool zero_centred, const Tensor& y);
// The fused forms of Backend (backend.h): bitwise their unfused sequences, except with a handoff (pre: the
// one matmul_add or rms_norm_swiglu_mlp_add wrote for this x and norm_w).
void rms_norm_matmul_split(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                           const Tensor& xn_scratch, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys,
                           const NormHandoff* pre = nullptr);
void swiglu_matmul_add(const Context& c, const Tensor& gate, const Tensor& up, const Tensor& w, const Tensor& bias,
                       const Tensor& scratch, const Tensor& y);
// act(rows, n/2) = silu_mul(gate, up) with {gate, up} = rms_norm_matmul_split(x, norm_w, ..., w, bias) over the
// stacked w = [gate; up] (n rows): one decode launch whose warps hold the gate and the up rows of the same
// positions and store only the activation, bitwise rms_norm_matmul_split then swiglu. Decode rows only:
// rms_norm_matmul_swiglu_fusable(x, w) must hold.
bool rms_norm_matmul_swiglu_fusable(const Tensor& x, const Tensor& w);
void rms_norm_matmul_swiglu(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                            const Tensor& w, const Tensor& bias, const Tensor& act);
// x += down(rms_norm_matmul_swiglu(x)) on the tensor-core kernel, gate/up's store also writing the activation's
// BF16 split, which down reads instead of splitting act itself (one kernel fewer; the same bits as
// rms_norm_matmul_swiglu then matmul_add). False, with nothing enqueued, when either weight or the rows do
// not take that kernel.
// pre: gate/up reads this handoff instead of normalising x; next: down also writes one (*wrote_next says
// whether it did).
bool rms_norm_swiglu_mlp_add(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                             const Tensor& w_gate_up, const Tensor& gate_up_bias, const Tensor& act, const Tensor& w_down,
                             const Tensor& down_bias, const NormHandoff* pre = nullptr,
                             const NormHandoff* next = nullptr, bool* wrote_next = nullptr);
void qk_norm_rope_kv_write(const Context& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                           const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots, const Tensor& k_cache,
                           const Tensor& v_cache);
// The attention prologue's operands (qk_norm_rope_kv_write's, as device pointers), for its kernel and for
// the q/k/v projection that does it in its stores (counts: that projection's per-head counters, else null).
struct PrologueArgs {
  float* q;        // (rows, n_heads · head_dim)
  float* k;        // (rows, n_kv_heads · head_dim)
  const float* v;  // (rows, n_kv_heads · head_dim)
  const void* q_norm;  // (head_dim) or null (then k_norm is null too)
  const void* k_norm;
  DType norm_dtype;
  float eps;
  int n_heads, n_kv_heads, head_dim, half;  // half = rot_dim / 2
  const int32_t* positions;
  const float* inv_freq;
  float scaling;
  const int32_t* slots;
  void* k_cache;
  void* v_cache;
  bool bf16_cache;
  int* counts;
};
// qk_norm_rope_kv_write's checks of its operands (aborting, naming op, on a broken precondition), then
// the arguments of its kernel; rows = positions.numel().
PrologueArgs prologue_args(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                           const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots, const Tensor& k_cache,
                           const Tensor& v_cache);
// rms_norm_matmul_split(x, norm_w, eps, false, -, w, bias, {q, k, v}) then qk_norm_rope_kv_write(q, k, v,
// ...) for decode rows, in one launch of the tensor-core matmul: each item's store counts itself on its
// head, and the block that stores a head's last item applies the prologue to that head (q/k norm, RoPE,
// K or V into the cache) with the prologue kernel's arithmetic, so the same bits as the two ops. True when
// it ran; false, with nothing enqueued, when the context, the rows (1-4), the shapes or the kernel do not
// take it (the caller runs the two ops). pre: the norm handoff the projection reads, as
// rms_norm_matmul_split's.
bool rms_norm_qkv_prologue(const Context& c, const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                           const Tensor& bias, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, int n_heads, int n_kv_heads, const Tensor& positions,
                           const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots, const Tensor& k_cache,
                           const Tensor& v_cache, const NormHandoff* pre);
void rope(const Context& c, const Tensor& x, int heads, const Tensor& positions, const Tensor& inv_freq,
          const RopeParams& params);
void kv_write(const Context& c, const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& k_cache,
              const Tensor& v_cache);
// during: what decode attention's partition blocks prefetch as they start (for the op after it).
// out_split: where decode attention's merge also writes out's split for o_proj's tensor-core matmul
// (attention_split_slot; rows 2r and 2r + 1 the split of out's row r, as split_x_kernel would make it), or
// null. True when it was written (decode rows, the merge kernel run).
bool attention(const Context& c, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out,
               const L2Prefetch& during = {}, __nv_bfloat16* out_split = nullptr);
void swiglu(const Context& c, const Tensor& gate, const Tensor& up, const Tensor& out);
void add(const Context& c, const Tensor& a, const Tensor& b, const Tensor& out);
void gather_rows(const Context& c, const Tensor& x, const Tensor& index, const Tensor& out);
void argmax_rows(const Context& c, const Tensor& x, const Tensor& out);
void select_candidates(const Context& c, const Tensor& logits, const Tensor& temperatures, const Tensor& top_k,
                       const Tensor& x, const Tensor& ids, const Tensor& count, const Tensor& valid, const Tensor& totals);
void copy_rows(const Context& c, const Tensor& x, const Tensor& src, const Tensor& dst);
void fill_random(const Context& c, const Tensor& t, uint64_t seed, float offset, float scale);

// The L2 evict_first policy operand of cp.async's cache hint, for data read once per step (the kernels
// pass it only when Context::stream_evict_first / kv_evict_first is set, and give no hint otherwise).
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

// qk_norm_rope_kv_write then attention (Backend::qk_norm_rope_attention) as one decode kernel: true when it
// ran, false with nothing enqueued when the shapes, the layout or the context do not take it (the caller
// then runs the two ops). The same bits as the two ops.
bool attention_with_prologue(const Context& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                             const Tensor& k_norm, float eps, const Tensor& positions, const Tensor& inv_freq,
                             const RopeParams& rope, const Tensor& k_cache, const Tensor& v_cache,
                             const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out,
                             const L2Prefetch& during = {}, __nv_bfloat16* out_split = nullptr,
                             bool* wrote_split = nullptr);

// Scratch the attention kernels need for a configuration; CudaBackend reserves the maximum at creation.
size_t attention_scratch_floats(int max_rows, int max_heads, int max_head_dim, int64_t max_context,
                                const PartitionTiers& tiers = {});

// ---- matmul (matmul.cu) ----
// Bytes of Context::matmul_scratch the matmuls need, and of one decode split region: matmul_scratch.h.

// Bumped whenever the decode kernel changes in a way that can change which configuration is fastest
// or how it is timed (the tuning cache is keyed by it). 2: weights staged through a shared-memory ring of
// cp.async copies; 3: candidates timed over weight copies larger than the L2 (cold, as in a forward);
// 4: weights loaded with the L2 evict_first policy (Context::stream_evict_first); 5: the next kernel
// launched early (Context::matmul_early_trigger), near-ties broken toward the larger ring (tune.cpp); 6: rings
// past 64 KB not taken (tune.cpp), the residual read before the item's rounds; 7: BF16 weights on the
// tensor-core kernel (MatmulDecodeConfig::mma_stages).
inline constexpr int kMatmulDecodeKernelRevision = 7;

// The decode matmul's trace events (Context::matmul_trace): block start, first rounds issued (before the
// wait), wait released, x staged (the first FMA may run), first work item stored, block end.
constexpr int kMatmulTraceEvents = 6;

// Launch configuration of the decode kernel (rows 1..kMaxDecodeRows) for one (n, k, w dtype) shape.
// k_warps alone decides the reduction order (32 · k_warps interleaved slices of k, see matmul.cu), so it
// decides the rounding of every output; the other fields change speed only. Whatever the row count,
// one shape runs with one configuration, which is what keeps rows bitwise batch-invariant.
//
// mma_stages > 0 selects the tensor-core kernel instead (BF16 w only; matmul.cu): its reduction order is
// fixed (4 warps over k), so the other fields are unused there and mma_stages, the depth of each warp's
// ring, changes speed only.
struct MatmulDecodeConfig {
  int features_per_lane = 2;  // output features each lane accumulates: 2 or 4
  int rounds_in_flight = 4;   // rounds of w chunks each lane has in flight (its shared-memory ring's depth)
  int feature_warps = 4;      // warps of a block over different features: 1, 2, 4 or 8
  int k_warps = 1;            // warps of a block splitting k: 1, 2 or 4 (feature_warps · k_warps <= 8)
  int mma_stages = 0;         // the tensor-core kernel with rings of this many stages: 4, 6 or 8 (0: FMA kernel)
};
bool operator==(const MatmulDecodeConfig& a, const MatmulDecodeConfig& b);

// Configurations chosen per shape (by timing the candidates on the device at first start; cached per
// GPU/driver/model by the backend). A model has a handful of shapes: looked up by linear search.
struct MatmulDecodeShapeConfig {
  int64_t n = 0, k = 0;
  DType w_dtype = DType::BF16;
  MatmulDecodeConfig config;
  // Under Context::kXSharedTuned, launches of at least this many row groups of 16 (1, 2, 3 or 4: 9, 17, 33 or
  // 49 rows and more) run on the x-shared kernel; kXSharedNever: none; 0: not timed (the wide rule).
  int x_shared_from_groups = 0;
};
inline constexpr int kXSharedNever = 5;
struct MatmulDecodeTable {
  std::vector<MatmulDecodeShapeConfig> entries;
};

// The configuration used for a shape that the table does not list (a function of the shape alone).
MatmulDecodeConfig matmul_decode_default_config(int64_t n, int64_t k, DType w_dtype);
// Every configuration worth timing for a shape (the default among them). Configurations with different
// k_warps round differently: a tuned table changes results (not their batch invariance) vs the default.
std::vector<MatmulDecodeConfig> matmul_decode_candidates(int64_t n, int64_t k, DType w_dtype);
bool matmul_decode_config_valid(const MatmulDecodeConfig& config, DType w_dtype);
// Bytes of a decode block's weight ring in shared memory (rounds in flight of 16-byte copies per thread).
size_t matmul_decode_ring_bytes(const MatmulDecodeConfig& config, DType w_dtype);
// The decode kernel with an explicit configuration, for any row count (the autotuner, tests, benches).
void matmul_decode(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                   const MatmulDecodeConfig& config);
// Which path matmul() takes for these operands: "decode", "decode-unaligned" (same order, scalar loads),
// "decode-mma" (the tensor-core kernel) or "cublaslt" (host-side query, enqueues nothing; for tests and
// benches).
const char* matmul_path(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);

}  // namespace helium::cuda
