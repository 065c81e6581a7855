// Deterministic pseudo-random fill for dummy weights: element i gets offset + scale * u, u uniform in
// [-1, 1) from a hash of (seed, i) (splitmix64): the same values as the CPU backend's fill_random.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_random_kernel(void* data, DType dtype, int64_t n, uint64_t seed, float offset, float scale) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    const float v = offset + (2.0f * u - 1.0f) * scale;
    switch (dtype) {
      case DType::BF16:
        static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(v);
        break;
      case DType::F16:
        static_cast<__half*>(data)[i] = __float2half_rn(v);
        break;
      default:
        static_cast<float*>(data)[i] = v;
    }
  }
}

}  // namespace

void fill_random(const Context& c, const Tensor& t, uint64_t seed, float offset, float scale) {
  HELIUM_CUDA_REQUIRE("fill_random", t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16);
  const int64_t n = t.numel();
  if (n == 0) return;
  launch(c, fill_random_kernel, std::min<unsigned>(blocks_for(n, 256), 8192u), 256, 0, t.data, t.dtype, n, seed,
                                                                                         offset, scale);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
