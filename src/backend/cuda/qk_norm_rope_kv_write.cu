// The attention prologue in one kernel: per-head RMSNorm of q and k (when the model has q_norm/k_norm),
// rotary embedding of both, K and V into the cache. One warp-sized block per (row, head), so the heads of
// a decode row run on as many multiprocessors (one block doing a row's 40 heads in turn took 19 µs on the
// H200; docs/benchmarks.md): the head is normalised into shared memory (the RMSNorm of elementwise.cuh, its kRmsLanes partials reduced
// by the warp in the tree the rms_norm kernel's block uses: rms_scale_warp), rotated pair by pair (rope_pair), and
// stored; the bits are those of rms_norm, rope and kv_write run one after the other.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

struct PrologueArgs {
  float* q;                 // (rows, n_heads · head_dim)
  float* k;                 // (rows, n_kv_heads · head_dim)
  const float* v;           // (rows, n_kv_heads · head_dim)
  const void* q_norm;       // (head_dim) or null (then k_norm is null too)
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
};

// grid (n_heads + n_kv_heads, rows), 32 threads: block (h, row) does q head h (h < n_heads) or k head
// h - n_heads together with the same v head.
// The head's norm weights and the rotary frequencies are weights, not the previous kernel's results: each
// lane loads the ones it will use before pdl_wait(), so that after it only the head's own read waits on the L2.
__global__ void __launch_bounds__(32) qk_norm_rope_kv_write_kernel(const PrologueArgs a) {
  extern __shared__ float smem[];  // kRmsLanes partials, then head_dim values, head_dim norm weights, half frequencies
  const int lane = threadIdx.x;
  float* partial = smem;
  float* head = partial + kRmsLanes;
  float* norm_w = head + a.head_dim;
  float* freq = norm_w + a.head_dim;
  const bool is_q = static_cast<int>(blockIdx.x) < a.n_heads;
  const void* norm = is_q ? a.q_norm : a.k_norm;
  // Each lane reads back only the entries it writes here (the same i = lane + 32 j below): no barrier needed.
  if (norm != nullptr)
    for (int i = lane; i < a.head_dim; i += 32) norm_w[i] = load_as_f32(norm, i, a.norm_dtype);
  for (int i = lane; i < a.half; i += 32) freq[i] = a.inv_freq[i];
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const int64_t row = blockIdx.y;
  const float pos = static_cast<float>(a.positions[row]);
  const int64_t kv_dim = int64_t{a.n_kv_heads} * a.head_dim;
  const int64_t slot = a.slots[row];

  {
    const int h = blockIdx.x;
    float* x = is_q ? a.q + (row * a.n_heads + h) * a.head_dim : a.k + row * kv_dim + int64_t{h - a.n_heads} * a.head_dim;
    for (int i = lane; i < a.head_dim; i += 32) head[i] = x[i];  // one coalesced read of the head
    __syncwarp();
    if (norm != nullptr) {
      for (int v = lane; v < kRmsLanes; v += 32) partial[v] = rms_partial(head, a.head_dim, v);
      __syncwarp();
      const float scale = rms_scale_warp(partial, a.head_dim, a.eps);
      for (int i = lane; i < a.head_dim; i += 32) head[i] = rms_apply(head[i], scale, norm_w[i], false);
      __syncwarp();
    }
    for (int i = lane; i < a.half; i += 32) rope_pair(head[i], head[i + a.half], pos, freq[i], a.scaling);
    __syncwarp();
    for (int i = lane; i < a.head_dim; i += 32) {
      x[i] = head[i];
      if (!is_q) store_cache(a.k_cache, a.bf16_cache, slot * kv_dim + int64_t{h - a.n_heads} * a.head_dim + i, head[i]);
    }
    if (!is_q) {
      const int64_t v0 = int64_t{h - a.n_heads} * a.head_dim;
      for (int i = lane; i < a.head_dim; i += 32) store_cache(a.v_cache, a.bf16_cache, slot * kv_dim + v0 + i, a.v[row * kv_dim + v0 + i]);
    }
  }
}

}  // namespace

void qk_norm_rope_kv_write(const Context& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                           const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots, const Tensor& k_cache,
                           const Tensor& v_cache) {
  const char* op = "qk_norm_rope_kv_write";
  HELIUM_CUDA_REQUIRE(op, q.dtype == DType::F32 && k.dtype == DType::F32 && v.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE(op, positions.dtype == DType::I32 && slots.dtype == DType::I32 && inv_freq.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE(op, rope.rot_dim > 0 && rope.rot_dim % 2 == 0 && rope.rot_dim <= rope.head_dim);
  HELIUM_CUDA_REQUIRE(op, (q_norm.data == nullptr) == (k_norm.data == nullptr));
  HELIUM_CUDA_REQUIRE(op, q_norm.data == nullptr || (q_norm.numel() == rope.head_dim && k_norm.numel() == rope.head_dim &&
                                                     q_norm.dtype == k_norm.dtype));
  HELIUM_CUDA_REQUIRE(op, k_cache.dtype == v_cache.dtype && (k_cache.dtype == DType::F32 || k_cache.dtype == DType::BF16));
  const int64_t rows = positions.numel(), kv_dim = int64_t{n_kv_heads} * rope.head_dim;
  HELIUM_CUDA_REQUIRE(op, slots.numel() == rows && cols_of(k_cache) == kv_dim && inv_freq.numel() == rope.rot_dim / 2);
  HELIUM_CUDA_REQUIRE(op, q.numel() == rows * n_heads * rope.head_dim && k.numel() == rows * kv_dim && v.numel() == rows * kv_dim);
  if (rows == 0) return;
  PrologueArgs a{};
  a.q = q.as<float>();
  a.k = k.as<float>();
  a.v = v.as<float>();
  a.q_norm = q_norm.data;
  a.k_norm = k_norm.data;
  a.norm_dtype = q_norm.dtype;
  a.eps = eps;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv_heads;
  a.head_dim = rope.head_dim;
  a.half = rope.rot_dim / 2;
  a.positions = positions.as<int32_t>();
  a.inv_freq = inv_freq.as<float>();
  a.scaling = rope.attention_scaling;
  a.slots = slots.as<int32_t>();
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  a.bf16_cache = k_cache.dtype == DType::BF16;
  const size_t smem = static_cast<size_t>(kRmsLanes + 2 * rope.head_dim + rope.rot_dim / 2) * sizeof(float);
  HELIUM_CUDA_REQUIRE(op, smem <= 48 * 1024 && rows <= 65535);
  launch(c, qk_norm_rope_kv_write_kernel, dim3(static_cast<unsigned>(n_heads + n_kv_heads), static_cast<unsigned>(rows)),
         32, smem, a);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
