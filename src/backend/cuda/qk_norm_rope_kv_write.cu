// The attention prologue in one kernel: per-head RMSNorm of q and k (when the model has q_norm/k_norm),
// rotary embedding of both, K and V into the cache. One warp-sized block per (row, head), so the heads of
// a decode row run on as many multiprocessors (one block doing a row's 40 heads in turn took 19 µs on the
// H200; docs/benchmarks.md): the head is normalised into shared memory (the RMSNorm of elementwise.cuh, its
// kRmsLanes partials reduced by the warp in the tree the rms_norm kernel's block uses: rms_scale_warp), rotated
// pair by pair (rope_angle then rope_rotate: rope_pair's arithmetic), and stored; the bits are those of rms_norm,
// rope and kv_write run one after the other.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/prologue.cuh"

namespace helium::cuda {
namespace {

// grid (n_heads + n_kv_heads, rows), 32 threads: block (h, row) does q head h (h < n_heads) or k head
// h - n_heads together with the same v head (prologue.cuh).
// What is not the previous kernel's result is read before pdl_wait(): the head's norm weights, the rotary
// angles of the row's position (rope_angle, into shared memory) and the row's K/V slot (positions and slots
// are step inputs, copied before the step's first kernel, as decode attention's layout is). After it one L2
// round trip: the head's values, and a k head's v values with them, read into registers at once
// (kPrologueRegs a lane, head_dim up to 256; a longer head takes prologue_qk_head and prologue_v_head, whose
// loads follow one another). Each lane reads back only the entries it writes (the same i = lane + 32 j
// throughout, also in prologue_qk_finish): no barrier between them. Until the forty-third session the slot
// was read after the rotation and the v values after the k head's stores, each its own round trip on the k
// blocks' path, which the partition kernel's wait sits behind: on an H100 (Qwen3-8B shape, 256 tokens, three
// rounds back to back; docs/benchmarks.md, forty-third session) 1K decoded at 181.44 / 182.04 / 181.85 tok/s
// against 180.75 / 180.82 / 181.37 before (8K and 32K level; measured beside a partition-kernel change that
// was level alone and was dropped).
// early_trigger: the next kernel may launch before this one's wait (Context::prologue_early_trigger).
constexpr int kPrologueRegs = 8;
__global__ void __launch_bounds__(32) qk_norm_rope_kv_write_kernel(const PrologueArgs a, bool early_trigger) {
  // kRmsLanes partials, head_dim values, head_dim norm weights, then the half pairs' cos and sin
  extern __shared__ float smem[];
  const int lane = threadIdx.x;
  float* partial = smem;
  float* head = partial + kRmsLanes;
  float* norm_w = head + a.head_dim;
  float* cos_s = norm_w + a.head_dim;
  float* sin_s = cos_s + a.half;
  const int h = blockIdx.x;
  const int64_t row = blockIdx.y;
  const bool is_q = h < a.n_heads;
  const void* norm = is_q ? a.q_norm : a.k_norm;
  if (norm != nullptr)
    for (int i = lane; i < a.head_dim; i += 32) norm_w[i] = load_as_f32(norm, i, a.norm_dtype);
  const float pos = static_cast<float>(a.positions[row]);
  for (int i = lane; i < a.half; i += 32) rope_angle(pos, a.inv_freq[i], a.scaling, cos_s[i], sin_s[i]);
  const int64_t slot = is_q ? 0 : int64_t{a.slots[row]};
  if (early_trigger) pdl_launch_dependents();
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  if (!early_trigger) pdl_launch_dependents();

  const int hv = h - a.n_heads;
  if (a.head_dim > 32 * kPrologueRegs) {  // a longer head: the shared loops (rope_pair: the same bits)
    prologue_qk_head(
        a, h, row, partial, head, [&](int i) { return norm_w[i]; }, [&](int i) { return a.inv_freq[i]; });
    if (!is_q) prologue_v_head(a, hv, row);
    return;
  }
  const int64_t kv_dim = int64_t{a.n_kv_heads} * a.head_dim;
  // From the L2: the projection wrote them.
  const float* x = is_q ? a.q + (row * a.n_heads + h) * a.head_dim : a.k + row * kv_dim + int64_t{hv} * a.head_dim;
  const float* v = is_q ? nullptr : a.v + row * kv_dim + int64_t{hv} * a.head_dim;
  float x_regs[kPrologueRegs], v_regs[kPrologueRegs];
#pragma unroll
  for (int j = 0; j < kPrologueRegs; ++j) {
    const int i = lane + 32 * j;
    if (i < a.head_dim) {
      x_regs[j] = __ldcg(x + i);
      if (!is_q) v_regs[j] = __ldcg(v + i);
    }
  }
#pragma unroll
  for (int j = 0; j < kPrologueRegs; ++j)
    if (lane + 32 * j < a.head_dim) head[lane + 32 * j] = x_regs[j];
  __syncwarp();
  prologue_qk_finish(a, h, row, slot, partial, head, [&](int i) { return norm_w[i]; },
                     [&](int i, float& x0, float& x1) { rope_rotate(x0, x1, cos_s[i], sin_s[i]); });
  if (is_q) return;
  // The v head into the V cache as it is (store_cache's rounding).
  const int64_t v0 = slot * kv_dim + int64_t{hv} * a.head_dim;
#pragma unroll
  for (int j = 0; j < kPrologueRegs; ++j)
    if (lane + 32 * j < a.head_dim) store_cache(a.v_cache, a.bf16_cache, v0 + lane + 32 * j, v_regs[j]);
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
  const size_t smem = static_cast<size_t>(kRmsLanes + 2 * rope.head_dim + rope.rot_dim) * sizeof(float);
  HELIUM_CUDA_REQUIRE(op, smem <= 48 * 1024 && rows <= 65535);
  launch(c, qk_norm_rope_kv_write_kernel, dim3(static_cast<unsigned>(n_heads + n_kv_heads), static_cast<unsigned>(rows)),
         32, smem, a, c.prologue_early_trigger);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
