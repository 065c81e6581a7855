// out = silu(gate) * up, elementwise (silu(g) = g / (1 + exp(-g)), as torch computes it in f32).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = silu_mul(gate[i], up[i]);
}

}  // namespace

void swiglu(const Context& c, const Tensor& gate, const Tensor& up, const Tensor& out) {
  HELIUM_CUDA_REQUIRE("swiglu", gate.dtype == DType::F32 && up.dtype == DType::F32 && out.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE("swiglu", gate.numel() == up.numel() && gate.numel() == out.numel());
  const int64_t n = gate.numel();
  if (n == 0) return;
  launch(c, swiglu_kernel, std::min<unsigned>(blocks_for(n, 256), 65535u), 256, 0, gate.as<float>(), up.as<float>(),
                                                                                     out.as<float>(), n);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
