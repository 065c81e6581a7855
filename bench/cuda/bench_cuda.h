// bench/cuda/bench_cuda.h — what the CUDA benchmarks share: a runtime call that fails ends the benchmark
// with the call and the error named.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define BENCH_CUDA(expr)                                                                                   \
  do {                                                                                                     \
    cudaError_t err_ = (expr);                                                                             \
    if (err_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

// Device 0's properties, or false (and a message) when there is no CUDA device.
inline bool bench_device(cudaDeviceProp& prop) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return false;
  }
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  return true;
}
