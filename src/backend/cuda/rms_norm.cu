// y = x * rsqrt(mean(x²) + eps) * w   (zero_centred: * (1 + w)), one block per row, with the fixed-order
// arithmetic of elementwise.cuh (rms_partial / rms_scale_block / rms_apply), which the fused
// kernels share: a row's result depends on nothing but the row.
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

constexpr int kThreads = kRmsLanes;

__global__ void rms_norm_kernel(const float* x, const void* w, DType w_dtype, int64_t dim, float eps,
                                bool zero_centred, float* y) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  __shared__ float partial[kRmsLanes];
  __shared__ float scale_slot;
  partial[threadIdx.x] = rms_partial(xr, dim, threadIdx.x);
  const float scale = rms_scale_block(partial, dim, eps, &scale_slot);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) yr[i] = rms_apply(xr[i], scale, load_as_f32(w, i, w_dtype), zero_centred);
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
