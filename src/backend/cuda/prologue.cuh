// backend/cuda/prologue.cuh — the attention prologue of one head (per-head RMSNorm of q and k when the model
// has q_norm/k_norm, rotary embedding, K and V into the cache), done by one warp: the arithmetic of
// qk_norm_rope_kv_write's kernel, which calls it for every head, and of the q/k/v projection that does the
// prologue in its stores (matmul.cu, rms_norm_qkv_prologue), which calls it for the heads whose last item it
// stored. The bits are those of rms_norm, rope and kv_write run one after the other.
#pragma once

#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {

// The rest of q head h (h < n_heads) or k head h - n_heads of `row` once its values are in `head`:
// normalised, rotated pair by pair (rotate(i, a, b): rope_pair of pair i, or rope_rotate by its angle taken
// earlier — the same bits), back into q or k in place and, for a k head, into the K cache at `slot`. All 32
// lanes of one warp call it after a __syncwarp that makes `head` visible. partial (kRmsLanes floats) and head
// (head_dim floats): the warp's shared memory; norm_w(i): the head's norm weight i as f32.
template <class NormW, class Rotate>
__device__ __forceinline__ void prologue_qk_finish(const PrologueArgs& a, int h, int64_t row, int64_t slot,
                                                   float* partial, float* head, NormW norm_w, Rotate rotate) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const bool is_q = h < a.n_heads;
  const void* norm = is_q ? a.q_norm : a.k_norm;
  const int64_t kv_dim = int64_t{a.n_kv_heads} * a.head_dim;
  float* x = is_q ? a.q + (row * a.n_heads + h) * a.head_dim : a.k + row * kv_dim + int64_t{h - a.n_heads} * a.head_dim;
  if (norm != nullptr) {
    for (int v = lane; v < kRmsLanes; v += 32) partial[v] = rms_partial(head, a.head_dim, v);
    __syncwarp();
    const float scale = rms_scale_warp(partial, a.head_dim, a.eps);
    for (int i = lane; i < a.head_dim; i += 32) head[i] = rms_apply(head[i], scale, norm_w(i), false);
    __syncwarp();
  }
  for (int i = lane; i < a.half; i += 32) rotate(i, head[i], head[i + a.half]);
  __syncwarp();
  for (int i = lane; i < a.head_dim; i += 32) {
    x[i] = head[i];
    if (!is_q) store_cache(a.k_cache, a.bf16_cache, slot * kv_dim + int64_t{h - a.n_heads} * a.head_dim + i, head[i]);
  }
  __syncwarp();  // head and partial are free again
}

// q head h (h < n_heads) or k head h - n_heads of `row`, in place, and a k head into the K cache: the head
// read from the L2 into `head`, then prologue_qk_finish. norm_w(i) and freq(i): the head's norm weight i as
// f32 and the rotary frequency i.
template <class NormW, class Freq>
__device__ __forceinline__ void prologue_qk_head(const PrologueArgs& a, int h, int64_t row, float* partial, float* head,
                                                 NormW norm_w, Freq freq) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const bool is_q = h < a.n_heads;
  const float pos = static_cast<float>(a.positions[row]);
  const int64_t kv_dim = int64_t{a.n_kv_heads} * a.head_dim;
  const float* x = is_q ? a.q + (row * a.n_heads + h) * a.head_dim : a.k + row * kv_dim + int64_t{h - a.n_heads} * a.head_dim;
  // From the L2: another block may have written the head in the same launch (the projection's stores).
  for (int i = lane; i < a.head_dim; i += 32) head[i] = __ldcg(x + i);  // one coalesced read of the head
  __syncwarp();
  prologue_qk_finish(a, h, row, is_q ? 0 : int64_t{a.slots[row]}, partial, head, norm_w,
                     [&](int i, float& x0, float& x1) { rope_pair(x0, x1, pos, freq(i), a.scaling); });
}

// v head hv of `row` into the V cache (as it is, with store_cache's rounding). One warp.
__device__ __forceinline__ void prologue_v_head(const PrologueArgs& a, int hv, int64_t row) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t kv_dim = int64_t{a.n_kv_heads} * a.head_dim, v0 = int64_t{hv} * a.head_dim;
  const int64_t slot = a.slots[row];
  for (int i = lane; i < a.head_dim; i += 32)
    store_cache(a.v_cache, a.bf16_cache, slot * kv_dim + v0 + i, __ldcg(a.v + row * kv_dim + v0 + i));
}

}  // namespace helium::cuda
