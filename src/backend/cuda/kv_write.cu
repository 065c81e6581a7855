// k_cache/v_cache[slots[r]] = k/v[r], stored as the cache's dtype (F32, or BF16 rounded to nearest even).
#include "backend/cuda/cuda_ops.cuh"
#include "backend/cuda/elementwise.cuh"

namespace helium::cuda {
namespace {

__global__ void kv_write_kernel(const float* k, const float* v, const int32_t* slots, int64_t kv_dim, void* k_cache,
                                void* v_cache, bool bf16) {
  pdl_wait();  // launched as a programmatic dependent: the previous kernel's writes are visible after this
  pdl_launch_dependents();
  const int64_t row = blockIdx.y, slot = slots[row];
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kv_dim; i += gridDim.x * blockDim.x) {
    store_cache(k_cache, bf16, slot * kv_dim + i, k[row * kv_dim + i]);
    store_cache(v_cache, bf16, slot * kv_dim + i, v[row * kv_dim + i]);
  }
}

}  // namespace

void kv_write(const Context& c, const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& k_cache,
              const Tensor& v_cache) {
  HELIUM_CUDA_REQUIRE("kv_write", k.dtype == DType::F32 && v.dtype == DType::F32 && slots.dtype == DType::I32);
  HELIUM_CUDA_REQUIRE("kv_write", k_cache.dtype == v_cache.dtype &&
                                      (k_cache.dtype == DType::F32 || k_cache.dtype == DType::BF16));
  const int64_t rows = slots.numel(), kv_dim = cols_of(k_cache);
  HELIUM_CUDA_REQUIRE("kv_write", k.numel() == rows * kv_dim && v.numel() == rows * kv_dim);
  if (rows == 0) return;
  dim3 grid(blocks_for(kv_dim, 256), static_cast<unsigned>(rows));
  launch(c, kv_write_kernel, grid, 256, 0, k.as<float>(), v.as<float>(), slots.as<int32_t>(), kv_dim, k_cache.data,
                                              v_cache.data, k_cache.dtype == DType::BF16);
  HELIUM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace helium::cuda
