// out[r] = index of the largest x[r][i], the lowest index among equal ones; NaN never wins and a NaN at
// index 0 (or a row of NaN) gives 0 — the result of the sampler's greedy scan (backend.h).
//
// A row of a vocabulary (152K logits) is too long for one block, so kBlocksPerRow blocks share it: each
// reduces a slice to its best (value, index), then folds it into the row's 64-bit key with atomicMax.
// The key orders candidates exactly as the scan does: the high word is the value's bits mapped to an
// unsigned order (-0 taken as +0, equal to it), the low word 0xffffffff - index (lower index, larger key).
// A maximum is the same whatever order the atomics land in, so the result is deterministic. Key 0 means
// "no candidate"; a NaN at index 0 sets the all-ones key, which decodes to index 0. Three launches: clear
// the keys (Context::argmax_keys), reduce, decode into out.
#include <cmath>

#include "backend/cuda/cuda_ops.cuh"

namespace helium::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerRow = 48;

__device__ __forceinline__ unsigned long long key_of(float v, int64_t i) {
  if (v == 0.0f) v = 0.0f;  // -0 and +0 are equal to the scan: the lower index must win between them
  const unsigned u = __float_as_uint(v);
  const unsigned ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(ordered) << 32) | (0xffffffffu - static_cast<unsigned>(i));
}

__global__ void clear_keys_kernel(unsigned long long* keys, int64_t rows) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) keys[r] = 0;
}

__global__ void __launch_bounds__(kThreads) argmax_keys_kernel(const float* x, int64_t n, unsigned long long* keys) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const int64_t row = blockIdx.y;
  const float* xr = x + row * n;
  const int64_t slice = (n + kBlocksPerRow - 1) / kBlocksPerRow;
  const int64_t begin = blockIdx.x * slice, end = min(n, begin + slice);
  unsigned long long best = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = xr[i];
    if (!isnan(v)) best = max(best, key_of(v, i));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && isnan(xr[0])) best = ~0ull;
  for (int offset = 16; offset >= 1; offset >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, offset));
  __shared__ unsigned long long s_best[kThreads / 32];
  if (threadIdx.x % 32 == 0) s_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) best = max(best, s_best[w]);
    if (best != 0) atomicMax(&keys[row], best);
  }
}

__global__ void decode_keys_kernel(const unsigned long long* keys, int64_t rows, int32_t* out) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const unsigned long long k = keys[r];
    out[r] = k == 0 ? 0 : static_cast<int32_t>(0xffffffffu - static_cast<unsigned>(k & 0xffffffffu));
  }
}

}  // namespace

void argmax_rows(const Context& c, const Tensor& x, const Tensor& out) {
  HELIUM_CUDA_REQUIRE("argmax_rows", x.data != nullptr && out.data != nullptr);
  HELIUM_CUDA_REQUIRE("argmax_rows", x.dtype == DType::F32 && out.dtype == DType::I32 && x.rank >= 1);
  const int64_t n = cols_of(x), rows = rows_of(x);
  HELIUM_CUDA_REQUIRE("argmax_rows", n >= 1 && n < (int64_t{1} << 31) && out.numel() == rows);
  if (rows == 0) return;
  HELIUM_CUDA_REQUIRE("argmax_rows", c.argmax_keys != nullptr && rows <= c.argmax_capacity && rows <= 65535);
  launch(c, clear_keys_kernel, 1, 64, 0, c.argmax_keys, rows);
  HELIUM_CUDA_CHECK(cudaGetLastError());
  launch(c, argmax_keys_kernel, dim3(kBlocksPerRow, static_cast<unsigned>(rows)), kThreads, 0, x.as<float>(), n,
         c.argmax_keys);
  HELIUM_CUDA_CHECK(cudaGetLastError());
  launch(c, decode_keys_kernel, 1, 64, 0, c.argmax_keys, rows, out.as<int32_t>());
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
