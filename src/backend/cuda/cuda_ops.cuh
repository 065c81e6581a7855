// backend/cuda/cuda_ops.cuh — what the op files share: the launch context, the per-op launchers that
// CudaBackend calls, and the error check. Included by .cu files only.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "backend/backend.h"

// A CUDA call that fails inside an op cannot return a Status (ops are void and asynchronous): it aborts
// with the call, file and line. Errors at load time are returned as Status by CudaBackend.
#define HELIUM_CUDA_CHECK(expr)                                                                       \
  do {                                                                                                \
    cudaError_t helium_err_ = (expr);                                                                 \
    if (helium_err_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "helium: CUDA error %s at %s:%d: %s\n", cudaGetErrorString(helium_err_),   \
                   __FILE__, __LINE__, #expr);                                                        \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (0)

// Precondition checks at op entry (host side), like the CPU backend's: abort naming the op.
#define HELIUM_CUDA_REQUIRE(op, cond)                                                                 \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      std::fprintf(stderr, "helium: cuda %s: check failed: %s (%s:%d)\n", op, #cond, __FILE__, __LINE__); \
      std::abort();                                                                                   \
    }                                                                                                 \
  } while (0)

namespace helium::cuda {

// Everything a launcher may use; owned by CudaBackend and reserved at creation.
struct Context {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* lt_workspace = nullptr;  // for cuBLASLt
  size_t lt_workspace_bytes = 0;
  float* attention_scratch = nullptr;  // split-KV partial results
  size_t attention_scratch_floats = 0;
  void* matmul_scratch = nullptr;  // e.g. bf16 copies of activations for large-M GEMMs
  size_t matmul_scratch_bytes = 0;
  int sm_count = 0;
  int max_rows = 0;
  int64_t max_context = 0;
};

// "Rows" = product of all but the last dimension; "cols" = the last dimension.
inline int64_t rows_of(const Tensor& t) { return t.rank == 0 ? 0 : t.numel() / t.shape[t.rank - 1]; }
inline int64_t cols_of(const Tensor& t) { return t.rank == 0 ? 0 : t.shape[t.rank - 1]; }

void embedding(const Context& c, const Tensor& table, const Tensor& ids, const Tensor& out);
void matmul(const Context& c, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);
void rms_norm(const Context& c, const Tensor& x, const Tensor& w, float eps, bool zero_centred, const Tensor& y);
void rope(const Context& c, const Tensor& x, int heads, const Tensor& positions, const Tensor& inv_freq,
          const RopeParams& params);
void kv_write(const Context& c, const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& k_cache,
              const Tensor& v_cache);
void attention(const Context& c, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
               const AttentionShape& shape, const AttentionLayout& layout, const Tensor& out);
void swiglu(const Context& c, const Tensor& gate, const Tensor& up, const Tensor& out);
void add(const Context& c, const Tensor& a, const Tensor& b, const Tensor& out);
void gather_rows(const Context& c, const Tensor& x, const Tensor& index, const Tensor& out);
void fill_random(const Context& c, const Tensor& t, uint64_t seed, float scale);

// Scratch the attention kernels need for a configuration; CudaBackend reserves the maximum at creation.
size_t attention_scratch_floats(int max_rows, int max_heads, int max_head_dim, int64_t max_context);

}  // namespace helium::cuda
