// backend/cuda/matmul_scratch.h — how many bytes of Context::matmul_scratch the CUDA matmuls use, in plain
// C++ so that the memory plan (engine/memory_plan.cpp) reserves them by the same rule the backend does
// (CudaBackend::create; as attention_partitions.h does for the attention partials).
//
// Prefill rows (more than kScratchDecodeRows): a BF16/F16 copy of x for cuBLASLt, rows · k · 2 bytes.
// Decode rows (the tensor-core kernel, matmul.cu): three split regions of rows · k · 4 bytes — x's split,
// the MLP activation's (written by gate/up for down), a norm handoff's — then the handoff's sums of
// squares, one float per kHandoffFeatures features of a row. The larger of the two.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace helium::cuda {

inline constexpr int64_t kScratchDecodeRows = 64;  // kMaxDecodeRows (cuda_backend.h; matmul.cu checks)
inline constexpr int64_t kHandoffFeatures = 16;    // features per sum of squares: the tensor-core item

inline constexpr size_t round_up_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// One decode split region for rows of at most max_k elements.
inline size_t matmul_split_region_bytes(int64_t max_rows, int64_t max_k) {
  return round_up_256(static_cast<size_t>(std::min(max_rows, kScratchDecodeRows) * max_k) * 4);
}

inline size_t matmul_scratch_bytes(int64_t max_rows, int64_t max_k) {
  const size_t prefill = max_rows > kScratchDecodeRows ? static_cast<size_t>(max_rows * max_k) * 2 : 0;
  const size_t sums = round_up_256(
      static_cast<size_t>(std::min(max_rows, kScratchDecodeRows) * ((max_k + kHandoffFeatures - 1) / kHandoffFeatures)) * 4);
  return round_up_256(std::max(prefill, 3 * matmul_split_region_bytes(max_rows, max_k) + sums));
}

}  // namespace helium::cuda
