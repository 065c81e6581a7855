// NeoX-style rotary embedding in place: within each head, x[i] and x[i + rot/2] rotate by angle
// position * inv_freq[i] (computed in f32 as transformers does), scaled by attention_scaling.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__global__ void rope_kernel(float* x, int heads, int head_dim, int half, const int32_t* positions,
                            const float* inv_freq, float scaling) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  const float pos = static_cast<float>(positions[row]);
  for (int t = threadIdx.x; t < heads * half; t += blockDim.x) {
    const int h = t / half, i = t % half;
    float* head = x + (row * heads + h) * head_dim;
    rope_pair(head[i], head[i + half], pos, inv_freq[i], scaling);
  }
}

}  // namespace

void rope(const Context& c, const Tensor& x, int heads, const Tensor& positions, const Tensor& inv_freq,
          const RopeParams& params) {
  HELIUM_CUDA_REQUIRE("rope", x.dtype == DType::F32 && positions.dtype == DType::I32 && inv_freq.dtype == DType::F32);
  HELIUM_CUDA_REQUIRE("rope", params.rot_dim > 0 && params.rot_dim % 2 == 0 && params.rot_dim <= params.head_dim);
  const int64_t rows = positions.numel();
  HELIUM_CUDA_REQUIRE("rope", x.numel() == rows * heads * params.head_dim && inv_freq.numel() == params.rot_dim / 2);
  if (rows == 0) return;
  launch(c, rope_kernel, static_cast<unsigned>(rows), 128, 0, x.as<float>(), heads, params.head_dim,
                                                                 params.rot_dim / 2, positions.as<int32_t>(),
                                                                 inv_freq.as<float>(), params.attention_scaling);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
