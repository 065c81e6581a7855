// x[dst[i]] = x[src[i]], any dtype, copied as bytes (dst rows distinct and disjoint from src rows).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__global__ void copy_rows_kernel(uint8_t* x, const int32_t* src, const int32_t* dst, int64_t row_bytes) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const int64_t r = blockIdx.y;
  const uint8_t* from = x + src[r] * row_bytes;
  uint8_t* to = x + dst[r] * row_bytes;
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < row_bytes; i += gridDim.x * blockDim.x) to[i] = from[i];
}

}  // namespace

void copy_rows(const Context& c, const Tensor& x, const Tensor& src, const Tensor& dst) {
  HELIUM_CUDA_REQUIRE("copy_rows", src.dtype == DType::I32 && dst.dtype == DType::I32 && src.numel() == dst.numel());
  const int64_t n = src.numel(), rows = x.rank == 0 ? 0 : x.shape[0];
  if (n == 0 || rows == 0) return;
  const int64_t row_bytes = static_cast<int64_t>(x.bytes()) / rows;
  dim3 grid(blocks_for(row_bytes, 256), static_cast<unsigned>(n));
  launch(c, copy_rows_kernel, grid, 256, 0, static_cast<uint8_t*>(x.data), src.as<int32_t>(), dst.as<int32_t>(),
                                               row_bytes);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
