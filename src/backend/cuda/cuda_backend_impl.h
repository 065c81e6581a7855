// backend/cuda/cuda_backend_impl.h — CudaBackend's private state, shared by cuda_backend.cu and
// tune.cpp. Not for use outside backend/cuda/.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"

namespace helium {

// Host staging: small per-step uploads (row metadata) and downloads (logits) go through pinned memory so
// they are asynchronous; downloads land in the caller's memory at synchronize().
struct CudaBackend::Impl {
  CudaBackendOptions options;
  CudaDeviceInfo info;
  cuda::Context ctx;
  cuda::MatmulDecodeTable matmul_table;  // tuned decode matmul configurations (tune.cpp)
  // The partition tiers at creation (the defaults or HELIUM_CUDA_ATTN_PARTITIONS's), which the attention
  // partials' scratch was reserved for: the attention tuner's starting point and bound (tune.cpp).
  cuda::PartitionTiers reserved_tiers;
  int64_t attention_trace_blocks = 0;  // HELIUM_CUDA_ATTN_TRACE's buffer (CudaBackend::take_attention_trace)
  std::vector<std::shared_ptr<DeviceBuffer>> owned;  // scratch and imported weights
  uint8_t* pinned = nullptr;
  size_t pinned_bytes = 0, pinned_used = 0;
  struct Download {
    void* dst;
    const void* staged;
    size_t bytes;
  };
  std::vector<Download> downloads;
  // Marks not yet waited for (CudaBackend::mark), oldest first: each an event recorded on the stream and
  // how many of `downloads` were enqueued before it. The staging ring is only reused after a full drain
  // (synchronize, or the ring running full), so a mark's downloads stay where they were staged.
  struct Mark {
    uint64_t id;
    cudaEvent_t event;
    size_t downloads;
  };
  std::vector<Mark> marks;
  std::vector<cudaEvent_t> spare_events;
  uint64_t last_mark = 0;
  int64_t qkv_prologues = 0;  // CudaBackend::qkv_prologue_count
  // Norm handoffs (Backend::prepare_norm, cuda::NormHandoff): the hint for the next op that adds into x,
  // then the handoff that op wrote, for the one op after it. Any other op forgets both (forget_hints).
  struct PendingNorm {
    const void* x = nullptr;
    Tensor norm_w;
    bool zero_centred = false;
  } pending_norm;
  struct ReadyNorm {
    const void* x = nullptr;
    const void* norm_w = nullptr;
    int64_t rows = 0;
    cuda::NormHandoff handoff;
  } ready_norm;
  // The prefetch hint (Backend::prefetch), for the next op; any op forgets it.
  struct PendingPrefetch {
    Tensor w;
    int stacked = 1;
  } pending_prefetch;
  // The split of a decode attention's output that its merge wrote (cuda::attention_split_slot), for the
  // one op after it if that op is matmul_add on the same output (o_proj); any other op forgets it.
  struct ReadySplit {
    const void* x = nullptr;
    int64_t rows = 0, cols = 0;
    __nv_bfloat16* split = nullptr;
  } ready_split;
  int64_t attention_splits = 0;  // CudaBackend::attention_split_count
  void forget_hints() {
    pending_norm = {};
    ready_norm = {};
    pending_prefetch = {};
    ready_split = {};
  }
  // Where an attention op writing `out` may have its merge write out's split (null: no handoff).
  __nv_bfloat16* attention_split_for(const Tensor& out) const {
    if (!ctx.attention_split || out.dtype != DType::F32) return nullptr;
    return cuda::attention_split_slot(ctx, cuda::rows_of(out), cuda::cols_of(out));
  }
  // After an attention op whose merge wrote the split of `out` (its return value `wrote`).
  void wrote_split(bool wrote, const Tensor& out, __nv_bfloat16* split) {
    if (wrote) ready_split = {out.data, cuda::rows_of(out), cuda::cols_of(out), split};
  }
  // Decode attention (cuda::attention) with its merge writing out's split where the handoff is on.
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const AttentionShape& shape,
                 const AttentionLayout& layout, const Tensor& out, const cuda::L2Prefetch& during) {
    __nv_bfloat16* split = attention_split_for(out);
    wrote_split(cuda::attention(ctx, q, k_cache, v_cache, shape, layout, out, during, split), out, split);
  }
  // The split for an op reading x, taken (and forgotten): null when none was written for it. The op counts
  // it (attention_splits) once its launch has read it.
  const __nv_bfloat16* take_split(const Tensor& x) {
    const ReadySplit r = ready_split;
    ready_split = {};
    if (r.x == nullptr || r.x != x.data || x.dtype != DType::F32 || r.rows != cuda::rows_of(x) ||
        r.cols != cuda::cols_of(x))
      return nullptr;
    return r.split;
  }
  // The hinted weight's first `cap` bytes, for the op about to run (which forgets the hint itself).
  cuda::L2Prefetch take_prefetch(int64_t cap) const {
    if (pending_prefetch.w.data == nullptr || cap <= 0) return {};
    return cuda::l2_prefetch_of(pending_prefetch.w, pending_prefetch.stacked, cap);
  }
  // The hint for an op about to add into y, taken (and forgotten) by it: a slot to write, or null. The ops
  // that take a hint or a handoff forget the other records themselves (forget_hints).
  const cuda::NormHandoff* take_pending(const Tensor& y, cuda::NormHandoff& slot) {
    const PendingNorm hint = pending_norm;
    pending_norm = {};
    if (!ctx.norm_handoff || hint.x == nullptr || hint.x != y.data || hint.norm_w.numel() != cuda::cols_of(y)) return nullptr;
    slot = cuda::norm_handoff_slot(ctx, cuda::rows_of(y), cuda::cols_of(y));
    if (slot.split == nullptr) return nullptr;
    slot.norm_w = hint.norm_w;
    slot.zero_centred = hint.zero_centred;
    return &slot;
  }
  // After the op that took it: what the following op may read.
  void wrote(const Tensor& y, const cuda::NormHandoff& slot) {
    ready_norm = {y.data, slot.norm_w.data, cuda::rows_of(y), slot};
  }
  // The handoff for an op normalising x with norm_w, taken (and forgotten): null when none was written for them.
  const cuda::NormHandoff* take_ready(const Tensor& x, const Tensor& norm_w, bool zero_centred, cuda::NormHandoff& out) {
    const ReadyNorm r = ready_norm;
    ready_norm = {};
    if (r.x == nullptr || r.x != x.data || r.norm_w != norm_w.data || r.rows != cuda::rows_of(x) ||
        r.handoff.zero_centred != zero_centred)
      return nullptr;
    out = r.handoff;
    return &out;
  }

  // Sets ctx.stream_enqueue for the scope of a matmul op: its one-row launches go to the layer stream's
  // queue (Context::stream_queue), launched with the next other kernel or flush.
  struct Enqueue {
    cuda::Context& ctx;
    explicit Enqueue(cuda::Context& c) : ctx(c) { ctx.stream_enqueue = ctx.stream_queue != nullptr; }
    ~Enqueue() { ctx.stream_enqueue = false; }
    Enqueue(const Enqueue&) = delete;
    Enqueue& operator=(const Enqueue&) = delete;
  };

  ~Impl() {
    if (ctx.stream_queue) cuda::free_stream_queue(ctx.stream_queue);
    for (const Mark& k : marks) cudaEventDestroy(k.event);
    for (cudaEvent_t e : spare_events) cudaEventDestroy(e);
    if (pinned) cudaFreeHost(pinned);
    if (ctx.lt) cublasLtDestroy(ctx.lt);
    if (ctx.stream) cudaStreamDestroy(ctx.stream);
  }

  // A pinned region for `bytes`; when the ring is full, drains the stream and starts over.
  uint8_t* stage(size_t bytes) {
    bytes = (bytes + 255) & ~size_t{255};
    if (bytes > pinned_bytes) return nullptr;
    if (pinned_used + bytes > pinned_bytes) {
      HELIUM_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
      drained();
    }
    uint8_t* p = pinned + pinned_used;
    pinned_used += bytes;
    return p;
  }
  // After the stream has run dry: every download lands, every mark is reached, the ring starts over.
  void drained() {
    for (const auto& d : downloads) std::memcpy(d.dst, d.staged, d.bytes);
    downloads.clear();
    for (const Mark& k : marks) spare_events.push_back(k.event);
    marks.clear();
    pinned_used = 0;
  }
};


}  // namespace helium
