#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/candidate_order.h"
#include "core/softmax_terms.h"

namespace helium {

std::string Tensor::shape_string() const {
  std::string s = "(";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ") " + std::string(dtype_name(dtype));
}

void Backend::matmul_split(const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys) {
  int64_t offset = 0;
  for (const Tensor& y : ys) {
    const int64_t n = y.shape[y.rank - 1];
    Tensor wi = w.rows_from(offset).first_rows(n);
    Tensor bi;
    if (bias.rank != 0) bi = Tensor(static_cast<uint8_t*>(bias.data) + offset * dtype_bytes(bias.dtype), bias.dtype, {n});
    matmul(x, wi, bi, y);
    offset += n;
  }
}

void Backend::matmul_add(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor scratch, Tensor y) {
  matmul(x, w, bias, scratch);
  add(y, scratch, y);
}

void Backend::rms_norm_matmul_split(const Tensor& x, const Tensor& norm_w, float eps, bool zero_centred,
                                    Tensor xn_scratch, const Tensor& w, const Tensor& bias,
                                    std::span<const Tensor> ys) {
  rms_norm(x, norm_w, eps, zero_centred, xn_scratch);
  matmul_split(xn_scratch, w, bias, ys);
}

void Backend::swiglu_matmul_add(Tensor gate, const Tensor& up, const Tensor& w, const Tensor& bias, Tensor scratch,
                                Tensor y) {
  swiglu(gate, up, gate);
  matmul_add(gate, w, bias, scratch, y);
}

void Backend::swiglu_mlp_add(Tensor x, const Tensor& norm_w, float eps, bool zero_centred, Tensor xn_scratch,
                             const Tensor& w_gate_up, const Tensor& gate_up_bias, Tensor gate, Tensor up,
                             const Tensor& w_down, const Tensor& down_bias) {
  const Tensor gate_up[] = {gate, up};
  rms_norm_matmul_split(x, norm_w, eps, zero_centred, xn_scratch, w_gate_up, gate_up_bias, gate_up);
  swiglu_matmul_add(gate, up, w_down, down_bias, xn_scratch, x);
}

void Backend::qk_norm_rope_kv_write(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                                    float eps, int n_heads, int n_kv_heads, const Tensor& positions,
                                    const Tensor& inv_freq, const RopeParams& rope_params, const Tensor& slots,
                                    Tensor k_cache, Tensor v_cache) {
  const int64_t rows = positions.numel();
  if (q_norm.data != nullptr) {  // per head: view (rows, heads · head_dim) as (rows · heads, head_dim)
    Tensor qh(q.data, DType::F32, {rows * n_heads, rope_params.head_dim});
    Tensor kh(k.data, DType::F32, {rows * n_kv_heads, rope_params.head_dim});
    rms_norm(qh, q_norm, eps, false, qh);
    rms_norm(kh, k_norm, eps, false, kh);
  }
  rope(q, n_heads, positions, inv_freq, rope_params);
  rope(k, n_kv_heads, positions, inv_freq, rope_params);
  kv_write(k, v, slots, k_cache, v_cache);
}

void Backend::qk_norm_rope_attention(Tensor q, Tensor k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                                     float eps, const Tensor& positions, const Tensor& inv_freq, const RopeParams& rope,
                                     Tensor k_cache, Tensor v_cache, const AttentionShape& shape,
                                     const AttentionLayout& layout, Tensor out) {
  qk_norm_rope_kv_write(q, k, v, q_norm, k_norm, eps, shape.n_heads, shape.n_kv_heads, positions, inv_freq, rope,
                        layout.write_slots, k_cache, v_cache);
  attention(q, k_cache, v_cache, shape, layout, out);
}

void Backend::rms_norm_qkv_attention(const Tensor& x, const Tensor& norm_w, float eps, Tensor xn_scratch,
                                     const Tensor& w_qkv, const Tensor& qkv_bias, Tensor q, Tensor k, Tensor v,
                                     const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
                                     const Tensor& inv_freq, const RopeParams& rope, Tensor k_cache, Tensor v_cache,
                                     const AttentionShape& shape, const AttentionLayout& layout, Tensor out) {
  const Tensor qkv[] = {q, k, v};
  rms_norm_matmul_split(x, norm_w, eps, false, xn_scratch, w_qkv, qkv_bias, qkv);
  qk_norm_rope_attention(q, k, v, q_norm, k_norm, eps, positions, inv_freq, rope, k_cache, v_cache, shape, layout, out);
}

void Backend::select_candidates(const Tensor& logits, const Tensor& temperatures, const Tensor& top_k, Tensor x,
                                Tensor ids, Tensor count, Tensor valid, Tensor totals) {
  const int64_t rows = logits.rank == 0 ? 0 : logits.numel() / logits.shape[logits.rank - 1];
  const int64_t n = rows == 0 ? 0 : logits.shape[logits.rank - 1];
  const int64_t cap = x.rank == 0 ? 0 : x.shape[x.rank - 1];
  std::vector<ScoredToken> c, best;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.as<float>() + r * n;
    const float t = temperatures.as<float>()[r];
    c.clear();
    for (int64_t i = 0; i < n; ++i)
      if (row[i] > -std::numeric_limits<float>::infinity()) c.emplace_back(row[i] / t, static_cast<int32_t>(i));
    valid.as<int32_t>()[r] = static_cast<int32_t>(c.size());
    if (totals.data != nullptr) totals.as<double>()[r] = softmax_total(std::span<const float>(row, static_cast<size_t>(n)), t);
    const auto keep = std::min<size_t>(c.size(), static_cast<size_t>(top_k.as<int32_t>()[r]));
    rank_best(c, static_cast<int64_t>(keep), best);
    count.as<int32_t>()[r] = static_cast<int32_t>(keep);
    for (size_t i = 0; i < keep && static_cast<int64_t>(i) < cap; ++i) {
      x.as<float>()[r * cap + static_cast<int64_t>(i)] = best[i].first;
      ids.as<int32_t>()[r * cap + static_cast<int64_t>(i)] = best[i].second;
    }
  }
}

}  // namespace helium
