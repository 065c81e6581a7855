// out(rows, dim) = table(vocab, dim)[ids], converted to f32; with sources, row r's id may come from an
// earlier op's output on the device (embedding_from: the previous step's argmax as this step's token).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__global__ void embedding_kernel(const void* table, DType dtype, const int32_t* ids, const int32_t* sources,
                                 const int32_t* previous, int64_t dim, float* out) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const int64_t row = blockIdx.y;
  const int32_t source = sources != nullptr ? sources[row] : -1;
  const int64_t id = source >= 0 ? previous[source] : ids[row];
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < dim; i += gridDim.x * blockDim.x)
    out[row * dim + i] = load_as_f32(table, id * dim + i, dtype);
}

}  // namespace

void embedding(const Context& c, const Tensor& table, const Tensor& ids, const Tensor& sources, const Tensor& previous,
               const Tensor& out) {
  HELIUM_CUDA_REQUIRE("embedding", table.rank == 2 && ids.dtype == DType::I32 && out.dtype == DType::F32);
  const int64_t rows = ids.numel(), dim = table.shape[1];
  HELIUM_CUDA_REQUIRE("embedding", rows_of(out) == rows && cols_of(out) == dim);
  const bool chained = sources.data != nullptr;
  HELIUM_CUDA_REQUIRE("embedding", !chained || (sources.dtype == DType::I32 && sources.numel() == rows &&
                                                previous.dtype == DType::I32 && previous.data != nullptr));
  if (rows == 0) return;
  dim3 grid(blocks_for(dim, 256), static_cast<unsigned>(rows));
  launch(c, embedding_kernel, grid, 256, 0, table.data, table.dtype, ids.as<int32_t>(),
         chained ? sources.as<int32_t>() : nullptr, chained ? previous.as<int32_t>() : nullptr, dim, out.as<float>());
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
