// backend/cuda/cuda_backend_impl.h — CudaBackend's private state, shared by cuda_backend.cu and
// tune.cpp. Not for use outside backend/cuda/.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_ops.cuh"

namespace helium {

// Host staging: small per-step uploads (row metadata) and downloads (logits) go through pinned memory so
// they are asynchronous; downloads land in the caller's memory at synchronize().
struct CudaBackend::Impl {
  CudaBackendOptions options;
  CudaDeviceInfo info;
  cuda::Context ctx;
  cuda::MatmulDecodeTable matmul_table;  // tuned decode matmul configurations (tune.cpp)
  std::vector<std::shared_ptr<DeviceBuffer>> owned;  // scratch and imported weights
  uint8_t* pinned = nullptr;
  size_t pinned_bytes = 0, pinned_used = 0;
  struct Download {
    void* dst;
    const void* staged;
    size_t bytes;
  };
  std::vector<Download> downloads;

  ~Impl() {
    if (pinned) cudaFreeHost(pinned);
    if (ctx.lt) cublasLtDestroy(ctx.lt);
    if (ctx.stream) cudaStreamDestroy(ctx.stream);
  }

  // A pinned region for `bytes`; when the ring is full, drains the stream and starts over.
  uint8_t* stage(size_t bytes) {
    bytes = (bytes + 255) & ~size_t{255};
    if (bytes > pinned_bytes) return nullptr;
    if (pinned_used + bytes > pinned_bytes) {
      HELIUM_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
      finish_downloads();
      pinned_used = 0;
    }
    uint8_t* p = pinned + pinned_used;
    pinned_used += bytes;
    return p;
  }
  void finish_downloads() {
    for (const auto& d : downloads) std::memcpy(d.dst, d.staged, d.bytes);
    downloads.clear();
  }
};


}  // namespace helium
