// backend/cpu/ops.h — the entry points of the CPU ops, one per file of the same name (matmul.cpp, ...).
// Owns: the context every op entry receives. Each entry checks shapes and dtypes (check.h), picks the
// kernel for the context's ISA, and splits the work over the thread pool by rows and output features only.
// CpuBackend's methods forward here; the preconditions are listed in cpu_backend.h.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace helium::cpu {

struct CpuContext {
  CpuIsa isa = CpuIsa::Scalar;
  ThreadPool* pool = nullptr;  // null runs inline
};

void embedding(const CpuContext& ctx, const Tensor& table, const Tensor& ids, const Tensor& out);
void embedding_from(const CpuContext& ctx, const Tensor& table, const Tensor& ids, const Tensor& sources,
                    const Tensor& previous, const Tensor& out);
void matmul(const CpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);
void rms_norm(const CpuContext& ctx, const Tensor& x, const Tensor& w, float eps, bool zero_centred,
              const Tensor& y);
void rope(const CpuContext& ctx, const Tensor& x, int heads, const Tensor& positions, const Tensor& inv_freq,
          const RopeParams& params);
void kv_write(const CpuContext& ctx, const Tensor& k, const Tensor& v, const Tensor& slots,
              const Tensor& k_cache, const Tensor& v_cache);
void attention(const CpuContext& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out);
void swiglu(const CpuContext& ctx, const Tensor& gate, const Tensor& up, const Tensor& out);
void add(const CpuContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out);
void gather_rows(const CpuContext& ctx, const Tensor& x, const Tensor& index, const Tensor& out);
void argmax_rows(const CpuContext& ctx, const Tensor& x, const Tensor& out);
void copy_rows(const CpuContext& ctx, const Tensor& x, const Tensor& src, const Tensor& dst);
void fill_random(const CpuContext& ctx, const Tensor& t, uint64_t seed, float offset, float scale);

// Shared shape vocabulary of the op entries: an activation is viewed as a matrix whose columns are its
// last dimension and whose rows are the product of the others.
inline int64_t matrix_cols(const Tensor& t) { return t.rank == 0 ? 0 : t.shape[t.rank - 1]; }
inline int64_t matrix_rows(const Tensor& t) {
  int64_t cols = matrix_cols(t);
  return cols == 0 ? 0 : t.numel() / cols;
}
inline bool is_float_weight(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

}  // namespace helium::cpu
