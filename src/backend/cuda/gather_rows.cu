// out(n, dim) = x(rows, dim)[index], any dtype (copied as bytes).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__global__ void gather_rows_kernel(const uint8_t* x, const int32_t* index, int64_t row_bytes, uint8_t* out) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const int64_t r = blockIdx.y, src = index[r];
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < row_bytes; i += gridDim.x * blockDim.x)
    out[r * row_bytes + i] = x[src * row_bytes + i];
}

}  // namespace

void gather_rows(const Context& c, const Tensor& x, const Tensor& index, const Tensor& out) {
  HELIUM_CUDA_REQUIRE("gather_rows", index.dtype == DType::I32 && out.dtype == x.dtype && cols_of(x) == cols_of(out));
  const int64_t n = index.numel(), row_bytes = cols_of(x) * dtype_bytes(x.dtype);
  HELIUM_CUDA_REQUIRE("gather_rows", rows_of(out) == n);
  if (n == 0) return;
  dim3 grid(blocks_for(row_bytes, 256), static_cast<unsigned>(n));
  launch(c, gather_rows_kernel, grid, 256, 0, static_cast<const uint8_t*>(x.data), index.as<int32_t>(), row_bytes,
                                                 static_cast<uint8_t*>(out.data));
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
