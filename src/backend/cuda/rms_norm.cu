// y = x * rsqrt(mean(x²) + eps) * w   (zero_centred: * (1 + w)), one block per row. The sum of squares is
// reduced in a fixed order (per-thread strided partial sums, then a fixed tree), so a row's result does
// not depend on the other rows.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void rms_norm_kernel(const float* x, const void* w, DType w_dtype, int64_t dim, float eps,
                                bool zero_centred, float* y) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) sum += xr[i] * xr[i];
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    float wi = load_as_f32(w, i, w_dtype);
    yr[i] = xr[i] * inv * (zero_centred ? 1.0f + wi : wi);
  }
}

}  // namespace

void rms_norm(const Context& c, const Tensor& x, const Tensor& w, float eps, bool zero_centred, const Tensor& y) {
  HELIUM_CUDA_REQUIRE("rms_norm", x.dtype == DType::F32 && y.dtype == DType::F32 && x.numel() == y.numel());
  const int64_t dim = cols_of(x), rows = rows_of(x);
  HELIUM_CUDA_REQUIRE("rms_norm", w.numel() == dim);
  if (rows == 0) return;
  launch(c, rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, x.as<float>(), w.data, w.dtype, dim, eps,
                                                                          zero_centred, y.as<float>());
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
