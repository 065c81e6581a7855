// The attention prologue in one kernel: per-head RMSNorm of q and k (when the model has q_norm/k_norm),
// rotary embedding of both, K and V into the cache. One warp-sized block per (row, head), so the heads of
// a decode row run on as many multiprocessors (one block doing a row's 40 heads in turn took 19 µs on the
// H200; docs/benchmarks.md): the head is normalised into shared memory (the RMSNorm of elementwise.cuh, its kRmsLanes partials reduced
// by the warp in the tree the rms_norm kernel's block uses: rms_scale_warp), rotated pair by pair (rope_pair), and
// stored; the bits are those of rms_norm, rope and kv_write run one after the other.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/prologue.cuh"

namespace helium::cuda {
namespace {

// grid (n_heads + n_kv_heads, rows), 32 threads: block (h, row) does q head h (h < n_heads) or k head
// h - n_heads together with the same v head (prologue.cuh).
// The head's norm weights and the rotary frequencies are weights, not the previous kernel's results: each
// lane loads the ones it will use before pdl_wait(), so that after it only the head's own read waits on the L2.
// early_trigger: the next kernel may launch before this one's wait (Context::prologue_early_trigger).
__global__ void __launch_bounds__(32) qk_norm_rope_kv_write_kernel(const PrologueArgs a, bool early_trigger) {
  extern __shared__ float smem[];  // kRmsLanes partials, then head_dim values, head_dim norm weights, half frequencies
  const int lane = threadIdx.x;
  float* partial = smem;
  float* head = partial + kRmsLanes;
  float* norm_w = head + a.head_dim;
  float* freq = norm_w + a.head_dim;
  const int h = blockIdx.x;
  const void* norm = h < a.n_heads ? a.q_norm : a.k_norm;
  // Each lane reads back only the entries it writes here (the same i = lane + 32 j in prologue_qk_head): no
  // barrier needed.
  if (norm != nullptr)
    for (int i = lane; i < a.head_dim; i += 32) norm_w[i] = load_as_f32(norm, i, a.norm_dtype);
  for (int i = lane; i < a.half; i += 32) freq[i] = a.inv_freq[i];
  if (early_trigger) pdl_launch_dependents();
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  if (!early_trigger) pdl_launch_dependents();
  const int64_t row = blockIdx.y;
  prologue_qk_head(a, h, row, partial, head, [&](int i) { return norm_w[i]; }, [&](int i) { return freq[i]; });
  if (h >= a.n_heads) prologue_v_head(a, h - a.n_heads, row);
}

}  // namespace

PrologueArgs prologue_args(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                           const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots, const Tensor& k_cache,
                           const Tensor& v_cache) {
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
  return a;
}

void qk_norm_rope_kv_write(const Context& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                           const Tensor& inv_freq, const RopeParams& rope, const Tensor& slots, const Tensor& k_cache,
                           const Tensor& v_cache) {
  const char* op = "qk_norm_rope_kv_write";
  const PrologueArgs a = prologue_args(op, q, k, v, q_norm, k_norm, eps, n_heads, n_kv_heads, positions, inv_freq, rope,
                                       slots, k_cache, v_cache);
  const int64_t rows = positions.numel();
  if (rows == 0) return;
  const size_t smem = static_cast<size_t>(kRmsLanes + 2 * rope.head_dim + rope.rot_dim / 2) * sizeof(float);
  HELIUM_CUDA_REQUIRE(op, smem <= 48 * 1024 && rows <= 65535);
  launch(c, qk_norm_rope_kv_write_kernel, dim3(static_cast<unsigned>(n_heads + n_kv_heads), static_cast<unsigned>(rows)),
         32, smem, a, c.prologue_early_trigger);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
