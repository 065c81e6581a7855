// backend/cpu/attention.h — the attention kernels' shared contract (entry and scalar kernel in
// attention.cpp, SIMD kernels in attention_avx2.cpp / attention_avx512.cpp).
// Must not: hold inline code or include backend.h (compiled with each ISA's flags; see matmul.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace helium::cpu {

// Keys per online-softmax tile. Tiles are counted from the first slot of the row's own list, i.e. by the
// keys' logical positions, so a row's result depends on its list alone (DESIGN.md, batch invariance).
constexpr int kAttentionTileKeys = 64;
// Query heads that share one pass over their kv head's keys (scores of all of them fit on the stack).
constexpr int kAttentionMaxHeadsPerPass = 16;
constexpr int kAttentionMaxHeadDim = 512;

struct AttentionProblem {
  const float* q;              // (rows, n_heads * head_dim)
  const void* k_cache;         // (cache slots, n_kv_heads * head_dim) of kv_dtype
  const void* v_cache;         // (cache slots, n_kv_heads * head_dim) of kv_dtype
  DType kv_dtype;              // F32 or BF16
  const int32_t* row_offsets;  // (rows + 1): row r's slots are slots[row_offsets[r] .. row_offsets[r+1])
  const int32_t* slots;        // (total)
  float* out;                  // (rows, n_heads * head_dim)
  int n_heads, n_kv_heads, head_dim;
  float scale;
};

// out[row, h] for query heads h in [head_begin, head_end) (at most kAttentionMaxHeadsPerPass, all sharing
// one kv head). Per head: for each tile of the row's keys in list order, scores s_j = (q · k_j) · scale;
// m' = max(m, max_j s_j); p_j = exp(s_j - m'); l = l · exp(m - m') + Σ_j p_j; acc = acc · exp(m - m') +
// Σ_j p_j v_j in key order; at the end out = acc / l. Dot products and the Σ p_j follow each SIMD kernel's
// fixed lane order (a key's score never depends on which keys share its vector registers); the scalar
// kernel sums in index order and uses std::exp.
using AttentionKernel = void (*)(const AttentionProblem& p, int64_t row, int head_begin, int head_end);

void attention_scalar(const AttentionProblem& p, int64_t row, int head_begin, int head_end);
namespace avx2 {
void attention(const AttentionProblem& p, int64_t row, int head_begin, int head_end);
}
namespace avx512 {
void attention(const AttentionProblem& p, int64_t row, int head_begin, int head_end);
}

}  // namespace helium::cpu
