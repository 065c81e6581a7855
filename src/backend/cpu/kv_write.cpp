// backend/cpu/kv_write.cpp — k_cache[slots] = k, v_cache[slots] = v, rounded to BF16 (nearest even) for a
// BF16 cache. Elementwise and exact-rounded, so a token's KV entry is the same whichever path (prefill,
// decode, tree verification) wrote it, and one kernel serves every ISA.
#include <cstring>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

namespace {

void write_row(const float* src, int64_t n, DType dtype, void* dst) {
  if (dtype == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

}  // namespace

// Runs on the calling thread: it moves a few KiB per row, and a fixed order makes a call with a repeated
// slot deterministic (the last row listed wins).
void kv_write(const CpuContext&, const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& k_cache,
              const Tensor& v_cache) {
  const OpDescription op("kv_write",
                         {{"k", &k}, {"v", &v}, {"slots", &slots}, {"k_cache", &k_cache}, {"v_cache", &v_cache}});
  HELIUM_CHECK(op, k.data != nullptr && v.data != nullptr && slots.data != nullptr && k_cache.data != nullptr &&
                       v_cache.data != nullptr)
      << "null tensor";
  HELIUM_CHECK(op, k.dtype == DType::F32 && v.dtype == DType::F32) << "k and v must be F32";
  HELIUM_CHECK(op, slots.dtype == DType::I32) << "slots must be I32";
  HELIUM_CHECK(op, (k_cache.dtype == DType::F32 || k_cache.dtype == DType::BF16) && v_cache.dtype == k_cache.dtype)
      << "caches must both be F32 or both BF16";
  const int64_t rows = slots.numel(), kv_dim = matrix_cols(k);
  HELIUM_CHECK(op, matrix_rows(k) == rows && matrix_rows(v) == rows && matrix_cols(v) == kv_dim)
      << "k and v must be (rows, kv_dim) with rows = slots";
  HELIUM_CHECK(op, k_cache.rank >= 1 && matrix_cols(k_cache) == kv_dim && matrix_cols(v_cache) == kv_dim &&
                       matrix_rows(k_cache) == matrix_rows(v_cache))
      << "caches must be (cache slots, kv_dim)";
  HELIUM_CHECK(op, !tensors_overlap(k_cache, k) && !tensors_overlap(k_cache, v) && !tensors_overlap(v_cache, k) &&
                       !tensors_overlap(v_cache, v) && !tensors_overlap(k_cache, v_cache))
      << "caches overlap the inputs or each other";
  const int64_t cache_slots = matrix_rows(k_cache);
  const int32_t* slot = slots.as<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    HELIUM_CHECK(op, slot[r] >= 0 && slot[r] < cache_slots)
        << "slots[" << r << "] = " << slot[r] << " outside [0, " << cache_slots << ")";

  const size_t row_bytes = static_cast<size_t>(kv_dim) * dtype_bytes(k_cache.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    write_row(k.as<float>() + r * kv_dim, kv_dim, k_cache.dtype,
              static_cast<uint8_t*>(k_cache.data) + static_cast<size_t>(slot[r]) * row_bytes);
    write_row(v.as<float>() + r * kv_dim, kv_dim, v_cache.dtype,
              static_cast<uint8_t*>(v_cache.data) + static_cast<size_t>(slot[r]) * row_bytes);
  }
}

}  // namespace helium::cpu
