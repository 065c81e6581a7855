// out = a + b, elementwise.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = a[i] + b[i];
}

}  // namespace

void add(const Context& c, const Tensor& a, const Tensor& b, const Tensor& out) {
  HELIUM_CUDA_REQUIRE("add", a.dtype == DType::F32 && b.dtype == DType::F32 && out.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE("add", a.numel() == b.numel() && a.numel() == out.numel());
  const int64_t n = a.numel();
  if (n == 0) return;
  launch(c, add_kernel, std::min<unsigned>(blocks_for(n, 256), 65535u), 256, 0, a.as<float>(), b.as<float>(),
                                                                                  out.as<float>(), n);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
