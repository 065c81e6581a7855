// backend/cuda/cuda_backend.h — the CUDA backend: device memory, one stream, cuBLASLt, CUDA graphs, and
// the op set of backend.h as CUDA kernels (one .cu file per op, same names as backend/cpu/).
// This header is plain C++ (no CUDA headers), so the engine can include it from g++-compiled code.
// Must not: know about models, files or requests. Kernels never allocate, log or synchronise: every
// scratch buffer is reserved when the backend is created, from CudaBackendOptions.
//
// Batch invariance (DESIGN.md invariant 2). Batches of up to kMaxDecodeRows rows (decode, batched decode,
// tree verification) go through kernels whose per-element reduction order depends only on the shapes
// (matmul over k, attention over fixed position tiles), never on the row count, so a row's result is
// bitwise the same alone or in any such batch. Larger batches (prefill) may use other kernels (cuBLASLt,
// flash attention); the rule that keeps speculative decoding seed-exact is that a prompt's KV is always
// written by the prefill path with the same chunking, and a generated token's KV by the decode path.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace helium {

inline constexpr int kMaxDecodeRows = 64;

struct CudaBackendOptions {
  int device = 0;
  int max_rows = 256;           // rows per forward the scratch buffers are sized for
  int64_t max_context = 32768;  // positions per sequence (attention split scratch)
  int max_heads = 128;          // query heads
  int max_head_dim = 256;
  int64_t max_k = 32768;        // largest matmul input width (prefill activations are copied to bf16)
  size_t cublas_workspace_bytes = size_t{32} << 20;
};

struct CudaDeviceInfo {
  std::string name;
  int sm_count = 0;
  int l2_bytes = 0;
  int compute_capability = 0;  // e.g. 90
  size_t total_memory = 0;
  int driver_version = 0;
  int runtime_version = 0;
};

// Number of usable CUDA devices; 0 when there is no driver or no GPU (never an error).
int cuda_device_count();

class CudaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<CudaBackend>> create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  const CudaDeviceInfo& device_info() const;
  // Device-to-device copy bandwidth in bytes/s (read + written) over a 1 GiB buffer, best of 10: the
  // ceiling that benchmarks print beside decode speed.
  double measure_copy_bandwidth();
  std::string name() const override;
  // measure_copy_bandwidth(): a 1 GiB device-to-device copy, bytes read + written.
  Result<MemoryBandwidth> measure_memory_bandwidth() override;
  Result<std::shared_ptr<DeviceBuffer>> allocate(size_t bytes) override;
  Result<Tensor> import_weight(const Tensor& host) override;
  void copy_to_device(Tensor dst, const void* host) override;
  void copy_to_host(void* host, const Tensor& src) override;
  void synchronize() override;
  uint64_t mark() override;
  void wait_for(uint64_t mark) override;
  bool queues_work() const override { return true; }
  // Graphs are on unless HELIUM_CUDA_GRAPHS=0 (for comparisons).
  bool supports_graphs() const override;
  // Times every decode-matmul candidate (matmul_decode_candidates) at one row for each shape and keeps
  // the fastest; the choice is cached as JSON in $HELIUM_CACHE_DIR (default ~/.cache/helium)/tune, keyed by
  // GPU, compute capability, driver and a hash of the shapes. A tuned configuration may sum in another
  // order than the default: results stay batch-invariant, and the cache keeps them stable across runs.
  Status tune_matmuls(const std::vector<MatmulShape>& shapes, bool retune) override;
  std::string tuning_cache_path(const std::vector<MatmulShape>& shapes) const;
  // Times decode attention (between a q/k/v projection and o_proj of q_dim-wide BF16 weights as in a decode
  // step: the projection, the q/k prologue, partitions, merge, o_proj; one row in a replayed graph) at each key
  // count from 1,024 to the context with each partition size the reserved scratch allows, and sets the
  // partition tiers from the timings (cuda::choose_partition_tiers); then, under those tiers at the fewest
  // keys, o_proj's ring after attention at 0 and 10 stages, three rounds alternating (Context::oproj_stages,
  // cuda::choose_oproj_stages; not where HELIUM_CUDA_OPROJ_STAGES sets it). Cached as JSON beside the matmul
  // choice, keyed by GPU, compute capability, driver, the attention shape, cache type, page size and context.
  // Does nothing where HELIUM_CUDA_ATTN_PARTITIONS sets the tiers. Neither choice changes a result's bits
  // beyond where a row's partials are cut: results stay batch-invariant (partition_keys depends on a row's
  // own keys; every o_proj depth gives the same bits).
  Status tune_attention(const AttentionShape& shape, int64_t hidden, DType kv_dtype, int page_size,
                        int64_t max_context, bool retune) override;
  std::string attention_tuning_cache_path(const AttentionShape& shape, int64_t hidden, DType kv_dtype, int page_size,
                                          int64_t max_context) const;
  // The partition tiers decode attention uses now (the defaults, HELIUM_CUDA_ATTN_PARTITIONS's, or the tuner's).
  std::array<int, 3> attention_partition_tiers() const;
  // o_proj's ring depth after decode attention now (Context::oproj_stages: the default,
  // HELIUM_CUDA_OPROJ_STAGES's, or the tuner's).
  int attention_oproj_stages() const;
  void begin_capture() override;
  Result<std::unique_ptr<OpGraph>> end_capture() override;
  // Matmuls launched on the layer stream so far (one-row decode matmuls queued and launched together;
  // cuda_ops.cuh, Context::stream_queue), and the launches they took: for tests and benchmarks. 0 when it is
  // off (HELIUM_CUDA_STREAM=off, before sm_90).
  struct StreamCounts {
    int64_t phases = 0, launches = 0;
  };
  StreamCounts layer_stream_counts() const;
  // With HELIUM_CUDA_ATTN_TRACE=1 (diagnostic): the decode partition kernel's blocks stamp their events
  // (%globaltimer ns; cuda_ops.cuh, Context::attention_trace) in every launch, graphs included, each launch
  // over the last — after a decode step, its last layer's. Per block, kAttentionTraceEvents (8) stamps; a
  // block that has not run since the last call here reads 0 (the call clears the buffer). Empty without it.
  std::vector<uint64_t> take_attention_trace();
  static constexpr int kAttentionTraceEvents = 8;  // cuda::kAttentionTraceEvents
  // Decode steps' q/k/v projections that did the attention prologue in their stores so far
  // (rms_norm_qkv_attention; cuda_ops.cuh, rms_norm_qkv_prologue): for tests.
  int64_t qkv_prologue_count() const;
  // matmul_adds that read the split of their x written by the attention op before them (decode attention's
  // merge for o_proj; cuda_ops.cuh, attention_split_slot) so far: for tests.
  int64_t attention_split_count() const;

  void embedding(const Tensor& table, const Tensor& ids, Tensor out) override;
  void embedding_from(const Tensor& table, const Tensor& ids, const Tensor& sources, const Tensor& previous,
                      Tensor out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) override;
  void matmul_split(const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys) override;
  void matmul_add(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor scratch, Tensor y) override;
  void prepare_norm(const Tensor& x, const Tensor& norm_w, bool zero_centred) override;
  void prefetch(const Tensor& w, int stacked = 1) override;
  bool prefers_stacked_projections() const override { return true; }
  void rms_norm_matmul_split(const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred, Tensor xn_scratch,
                             const Tensor& w, const Tensor& bias, std::span<const Tensor> ys) override;
  void swiglu_mlp_add(Tensor x, const Tensor& norm_w, float eps, bool zero_centred, Tensor xn_scratch,
                      const Tensor& w_gate_up, const Tensor& gate_up_bias, Tensor gate, Tensor up, const Tensor& w_down,
                      const Tensor& down_bias) override;
  void swiglu_matmul_add(Tensor gate, const Tensor& up, const Tensor& w, const Tensor& bias, Tensor scratch,
                         Tensor y) override;
  void qk_norm_rope_kv_write(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm, float eps,
                             int n_heads, int n_kv_heads, const Tensor& positions, const Tensor& inv_freq,
                             const RopeParams& rope, const Tensor& slots, Tensor k_cache, Tensor v_cache) override;
  void qk_norm_rope_attention(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& positions, const Tensor& inv_freq, const RopeParams& rope, Tensor k_cache,
                              Tensor v_cache, const AttentionShape& shape, const AttentionLayout& layout,
                              Tensor out) override;
  void rms_norm_qkv_attention(const Tensor& x, const Tensor& norm_w, float eps, Tensor xn_scratch, const Tensor& w_qkv,
                              const Tensor& qkv_bias, Tensor q, Tensor k, Tensor v, const Tensor& q_norm,
                              const Tensor& k_norm, const Tensor& positions, const Tensor& inv_freq,
                              const RopeParams& rope, Tensor k_cache, Tensor v_cache, const AttentionShape& shape,
                              const AttentionLayout& layout, Tensor out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, bool zero_centred, Tensor y) override;
  void rope(Tensor x, int heads, const Tensor& positions, const Tensor& inv_freq, const RopeParams& params) override;
  void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor k_cache, Tensor v_cache) override;
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const AttentionShape& shape,
                 const AttentionLayout& layout, Tensor out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor out) override;
  void add(const Tensor& a, const Tensor& b, Tensor out) override;
  void gather_rows(const Tensor& x, const Tensor& index, Tensor out) override;
  void argmax_rows(const Tensor& x, Tensor out) override;
  void select_candidates(const Tensor& logits, const Tensor& temperatures, const Tensor& top_k, Tensor x, Tensor ids,
                         Tensor count, Tensor valid, Tensor totals) override;
  void copy_rows(Tensor x, const Tensor& src, const Tensor& dst) override;

  void fill_random(Tensor t, uint64_t seed, float offset, float scale) override;

  struct Impl;

 private:
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace helium
