// backend/cuda/elementwise.cuh — loads of weight elements of any float dtype as f32, shared by the
// small op files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"

namespace helium::cuda {

__device__ __forceinline__ float load_as_f32(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::F16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace helium::cuda
