// backend/cuda/elementwise.cuh — loads of weight elements of any float dtype as f32, shared by the
// small op files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"

namespace helium::cuda {

__device__ __forceinline__ float load_as_f32(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::F16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// The split of one element for the tensor-core decode matmul (matmul.cu): hi = bf16(v), lo = bf16(v - hi),
// both rounded to nearest. Every writer of a split (split_x_kernel, gate/up's store of the activation for
// down, a norm handoff's producer, decode attention's merge for o_proj) goes through it: the matmul's bits
// rest on them being the same.
__device__ __forceinline__ void split_bf16(float v, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  hi = __float2bfloat16_rn(v);
  lo = __float2bfloat16_rn(__fsub_rn(v, __bfloat162float(hi)));
}

// A KV-cache element: F32 as it is, or BF16 rounded to nearest even (kv_write and the fused prologue).
__device__ __forceinline__ void store_cache(void* cache, bool bf16, int64_t i, float value) {
  if (bf16) static_cast<__nv_bfloat16*>(cache)[i] = __float2bfloat16_rn(value);
  else static_cast<float*>(cache)[i] = value;
}

// silu(g) · u as torch computes it in f32 (g / (1 + exp(-g)), IEEE division): the swiglu kernel and the
// decode matmul's fused staging both use this, so the fused and unfused paths give the same bits.
__device__ __forceinline__ float silu_mul(float g, float u) { return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u); }

// RMSNorm's arithmetic, shared by the rms_norm kernel and every kernel that fuses a norm (the decode matmul's
// staging, the q/k norm before rope), so fused and unfused give the same bits. Whatever a kernel's block
// size, the sum of squares of a row is reduced as if by kRmsLanes virtual threads: virtual thread v sums
// x[v], x[v + kRmsLanes], ... (one fma each, from +0), then the kRmsLanes partials are added pairwise in a
// fixed tree (v += v + s for s = kRmsLanes/2 ... 1). The scale is rsqrt(sum / dim + eps); y = (x · scale) · w.
constexpr int kRmsLanes = 256;

__device__ __forceinline__ float rms_partial(const float* x, int64_t dim, int v) {
  float sum = 0.0f;
#pragma unroll 16
  for (int64_t i = v; i < dim; i += kRmsLanes) sum = __fmaf_rn(x[i], x[i], sum);  // loads issued ahead
  return sum;
}

// Reduces partial[0 .. kRmsLanes) by the tree above with one warp (all 32 lanes call it after the partials
// are visible to them): the levels kRmsLanes/2 .. 32 in place in shared memory, the last five by shuffles
// (lane v < s adds lane v + s: the same pairs). Every lane returns the scale.
__device__ __forceinline__ float rms_scale_warp(float* partial, int64_t dim, float eps) {
  static_assert(kRmsLanes >= 64 && (kRmsLanes & (kRmsLanes - 1)) == 0);
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (int s = kRmsLanes / 2; s >= 32; s >>= 1) {
    for (int v = lane; v < s; v += 32) partial[v] = __fadd_rn(partial[v], partial[v + s]);
    __syncwarp();
  }
  float sum = partial[lane];
#pragma unroll
  for (int s = 16; s >= 1; s >>= 1) sum = __fadd_rn(sum, __shfl_down_sync(0xffffffffu, sum, s));  // lane v < s: v + (v + s)
  sum = __shfl_sync(0xffffffffu, sum, 0);
  return rsqrtf(__fadd_rn(__fdiv_rn(sum, static_cast<float>(dim)), eps));
}

// rms_scale_warp's scale from the kRmsLanes partials held in registers, kRmsLanes / 32 a lane (virtual
// thread v = lane + 32 t in p[t]) instead of shared memory: the same partials added in the same pairs, so the
// same bits. All 32 lanes call it; each returns the scale. For kernels that hold a head in registers (decode
// attention's fused prologue).
__device__ __forceinline__ float rms_scale_of_partials(float (&p)[kRmsLanes / 32], int64_t dim, float eps) {
  constexpr int kPer = kRmsLanes / 32;
  // Level s (kRmsLanes/2 .. 32): v < s adds v + s, i.e. slot t < s / 32 adds slot t + s / 32.
#pragma unroll
  for (int n = kPer / 2; n >= 1; n >>= 1)
#pragma unroll
    for (int t = 0; t < n; ++t) p[t] = __fadd_rn(p[t], p[t + n]);
  float sum = p[0];
#pragma unroll
  for (int s = 16; s >= 1; s >>= 1) sum = __fadd_rn(sum, __shfl_down_sync(0xffffffffu, sum, s));
  sum = __shfl_sync(0xffffffffu, sum, 0);
  return rsqrtf(__fadd_rn(__fdiv_rn(sum, static_cast<float>(dim)), eps));
}

// The same for a whole block (blockDim.x >= 32; every thread calls it after writing its partials): warp 0
// runs rms_scale_warp between two barriers. The scale goes through *slot (shared
// memory) to every thread; `partial` may be rewritten once this returns.
__device__ __forceinline__ float rms_scale_block(float* partial, int64_t dim, float eps, float* slot) {
  __syncthreads();
  if (threadIdx.x < 32) {
    const float scale = rms_scale_warp(partial, dim, eps);
    if (threadIdx.x == 0) *slot = scale;
  }
  __syncthreads();
  return *slot;
}

__device__ __forceinline__ float rms_apply(float x, float scale, float w, bool zero_centred) {
  return __fmul_rn(__fmul_rn(x, scale), zero_centred ? __fadd_rn(1.0f, w) : w);
}

// NeoX rotary embedding of one pair (a = x[i], b = x[i + rot/2]) by angle pos · inv_freq, cos and sin
// scaled by `scaling`; explicit roundings, shared by the rope kernel and the fused q/k prologue.
// In two halves for kernels that take the angle's cos and sin before their inputs are ready (decode
// attention's fused prologue): rope_angle, then rope_rotate; the same bits.
__device__ __forceinline__ void rope_angle(float pos, float inv_freq, float scaling, float& c, float& s) {
  sincosf(__fmul_rn(pos, inv_freq), &s, &c);
  c = __fmul_rn(c, scaling);
  s = __fmul_rn(s, scaling);
}
__device__ __forceinline__ void rope_rotate(float& a, float& b, float c, float s) {
  const float ra = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  const float rb = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  a = ra;
  b = rb;
}
__device__ __forceinline__ void rope_pair(float& a, float& b, float pos, float inv_freq, float scaling) {
  float c, s;
  rope_angle(pos, inv_freq, scaling, c, s);
  rope_rotate(a, b, c, s);
}

inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace helium::cuda
