// backend/cpu/attention.cpp — softmax(q kᵀ · scale) v over each row's own list of KV-cache slots: the op
// entry, the work split, and the scalar reference kernel (contract in attention.h).
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

namespace {

// Below this many multiply-adds per thread, waking threads costs more than it saves.
constexpr int64_t kMinMacsPerThread = 64 * 1024;

float kv_at(const void* row, DType dtype, int64_t i) {
  return dtype == DType::BF16 ? bf16_to_f32(static_cast<const uint16_t*>(row)[i]) : static_cast<const float*>(row)[i];
}

AttentionKernel pick_kernel(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return avx512::attention;
    case CpuIsa::Avx2: return avx2::attention;
    case CpuIsa::Scalar: break;
  }
  return attention_scalar;
}

// Rows visited in the order 0, R-1, 1, R-2, ...: a causal prefill's row costs grow with the row index, and
// each thread takes a contiguous range of tasks, so pairing short rows with long ones balances the
// threads. Only which thread computes a row changes, never how.
int64_t zigzag_row(int64_t i, int64_t rows) { return i % 2 == 0 ? i / 2 : rows - 1 - i / 2; }

}  // namespace

void attention_scalar(const AttentionProblem& p, int64_t row, int head_begin, int head_end) {
  const int head_dim = p.head_dim, heads = head_end - head_begin;
  const int kv_head = head_begin / (p.n_heads / p.n_kv_heads);
  const int64_t q_stride = static_cast<int64_t>(p.n_heads) * head_dim;
  const size_t kv_row_bytes = static_cast<size_t>(p.n_kv_heads) * head_dim * dtype_bytes(p.kv_dtype);
  const size_t kv_head_bytes = static_cast<size_t>(kv_head) * head_dim * dtype_bytes(p.kv_dtype);
  const int32_t* list = p.slots + p.row_offsets[row];
  const int64_t n_keys = p.row_offsets[row + 1] - p.row_offsets[row];

  float m[kAttentionMaxHeadsPerPass], l[kAttentionMaxHeadsPerPass];
  float probs[kAttentionMaxHeadsPerPass][kAttentionTileKeys];
  const void* k_rows[kAttentionTileKeys];
  const void* v_rows[kAttentionTileKeys];
  for (int64_t t0 = 0; t0 < n_keys; t0 += kAttentionTileKeys) {
    const bool first = t0 == 0, last = t0 + kAttentionTileKeys >= n_keys;
    const int count = static_cast<int>(std::min<int64_t>(kAttentionTileKeys, n_keys - t0));
    for (int j = 0; j < count; ++j) {
      const size_t offset = static_cast<size_t>(list[t0 + j]) * kv_row_bytes + kv_head_bytes;
      k_rows[j] = static_cast<const uint8_t*>(p.k_cache) + offset;
      v_rows[j] = static_cast<const uint8_t*>(p.v_cache) + offset;
    }
    for (int h = 0; h < heads; ++h) {
      const float* q = p.q + row * q_stride + static_cast<int64_t>(head_begin + h) * head_dim;
      float* o = p.out + row * q_stride + static_cast<int64_t>(head_begin + h) * head_dim;
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < count; ++j) {
        float dot = 0.0f;
        for (int d = 0; d < head_dim; ++d) dot += q[d] * kv_at(k_rows[j], p.kv_dtype, d);
        probs[h][j] = dot * p.scale;
        tile_max = std::max(tile_max, probs[h][j]);
      }
      const float m_new = first ? tile_max : std::max(m[h], tile_max);
      const float correction = first ? 0.0f : std::exp(m[h] - m_new);
      float sum = 0.0f;
      for (int j = 0; j < count; ++j) {
        probs[h][j] = std::exp(probs[h][j] - m_new);
        sum += probs[h][j];
      }
      l[h] = first ? sum : l[h] * correction + sum;
      m[h] = m_new;
      for (int d = 0; d < head_dim; ++d) o[d] = first ? 0.0f : o[d] * correction;
      for (int j = 0; j < count; ++j)
        for (int d = 0; d < head_dim; ++d) o[d] += probs[h][j] * kv_at(v_rows[j], p.kv_dtype, d);
      if (last)
        for (int d = 0; d < head_dim; ++d) o[d] /= l[h];
    }
  }
}

void attention(const CpuContext& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out) {
  const OpDescription op("attention", {{"q", &q},
                                       {"k_cache", &k_cache},
                                       {"v_cache", &v_cache},
                                       {"row_offsets", &layout.row_offsets},
                                       {"slots", &layout.slots},
                                       {"out", &out}});
  HELIUM_CHECK(op, q.data != nullptr && k_cache.data != nullptr && v_cache.data != nullptr &&
                       layout.row_offsets.data != nullptr && layout.slots.data != nullptr && out.data != nullptr)
      << "null tensor";
  HELIUM_CHECK(op, shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0)
      << "n_heads " << shape.n_heads << " must be a multiple of n_kv_heads " << shape.n_kv_heads;
  HELIUM_CHECK(op, shape.head_dim > 0 && shape.head_dim <= kAttentionMaxHeadDim)
      << "head_dim " << shape.head_dim << " outside [1, " << kAttentionMaxHeadDim << "]";
  HELIUM_CHECK(op, std::isfinite(shape.scale)) << "scale " << shape.scale;
  HELIUM_CHECK(op, q.dtype == DType::F32 && out.dtype == DType::F32) << "q and out must be F32";
  HELIUM_CHECK(op, (k_cache.dtype == DType::F32 || k_cache.dtype == DType::BF16) && v_cache.dtype == k_cache.dtype)
      << "caches must both be F32 or both BF16";
  HELIUM_CHECK(op, layout.row_offsets.dtype == DType::I32 && layout.slots.dtype == DType::I32)
      << "layout must be I32";
  const int64_t q_dim = static_cast<int64_t>(shape.n_heads) * shape.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * shape.head_dim;
  const int64_t rows = q.rank >= 1 ? q.dim(0) : 0;
  HELIUM_CHECK(op, q.rank >= 1 && q.numel() == rows * q_dim) << "q must be (rows, n_heads * head_dim)";
  HELIUM_CHECK(op, out.rank >= 1 && out.dim(0) == rows && out.numel() == rows * q_dim)
      << "out must be shaped like q";
  HELIUM_CHECK(op, layout.row_offsets.numel() == rows + 1) << "row_offsets must hold rows + 1 values";
  HELIUM_CHECK(op, k_cache.rank >= 1 && matrix_cols(k_cache) == kv_dim && matrix_cols(v_cache) == kv_dim &&
                       matrix_rows(k_cache) == matrix_rows(v_cache))
      << "caches must be (cache slots, n_kv_heads * head_dim)";
  HELIUM_CHECK(op, !tensors_overlap(out, q) && !tensors_overlap(out, k_cache) && !tensors_overlap(out, v_cache))
      << "out overlaps an input";
  const int32_t* offsets = layout.row_offsets.as<int32_t>();
  const int32_t* slots = layout.slots.as<int32_t>();
  const int64_t total = layout.slots.numel(), cache_slots = matrix_rows(k_cache);
  for (int64_t r = 0; r < rows; ++r)
    HELIUM_CHECK(op, offsets[r] >= 0 && offsets[r] < offsets[r + 1] && offsets[r + 1] <= total)
        << "row " << r << " has slots [" << offsets[r] << ", " << offsets[r + 1] << ") of " << total
        << " (every row needs at least one)";
  int64_t keys = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int32_t i = offsets[r]; i < offsets[r + 1]; ++i)
      HELIUM_CHECK(op, slots[i] >= 0 && slots[i] < cache_slots)
          << "slots[" << i << "] = " << slots[i] << " outside [0, " << cache_slots << ")";
    keys += offsets[r + 1] - offsets[r];
  }
  if (rows == 0) return;

  const AttentionProblem problem{q.as<float>(), k_cache.data,  v_cache.data,  k_cache.dtype,
                                 offsets,       slots,         out.as<float>(), shape.n_heads,
                                 shape.n_kv_heads, shape.head_dim, shape.scale};
  const AttentionKernel kernel = pick_kernel(ctx.isa);
  const int group = shape.n_heads / shape.n_kv_heads;
  const int passes = (group + kAttentionMaxHeadsPerPass - 1) / kAttentionMaxHeadsPerPass;
  const int heads_per_pass = (group + passes - 1) / passes;
  const int64_t tasks_per_row = static_cast<int64_t>(shape.n_kv_heads) * passes;
  const int64_t tasks = rows * tasks_per_row;
  const int64_t macs = 2 * keys * q_dim;  // q·k and p·v
  const int64_t grain = std::max<int64_t>(1, kMinMacsPerThread * tasks / std::max<int64_t>(1, macs));
  parallel_for(ctx.pool, tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = zigzag_row(t / tasks_per_row, rows);
      const int kv_head = static_cast<int>(t % tasks_per_row) / passes;
      const int pass = static_cast<int>(t % tasks_per_row) % passes;
      const int head_begin = kv_head * group + pass * heads_per_pass;
      const int head_end = std::min(kv_head * group + group, head_begin + heads_per_pass);
      kernel(problem, row, head_begin, head_end);
    }
  });
}

}  // namespace helium::cpu
