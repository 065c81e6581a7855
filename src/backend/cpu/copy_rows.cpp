// backend/cpu/copy_rows.cpp — x[dst[i]] = x[src[i]]: row moves inside one tensor (accepted speculation
// KV moved from scratch slots to its sequence's slots). Exact copies: one kernel for every ISA.
#include <cstring>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

void copy_rows(const CpuContext&, const Tensor& x, const Tensor& src, const Tensor& dst) {
  const OpDescription op("copy_rows", {{"x", &x}, {"src", &src}, {"dst", &dst}});
  HELIUM_CHECK(op, x.data != nullptr && x.rank >= 1) << "x must have rows";
  HELIUM_CHECK(op, src.dtype == DType::I32 && dst.dtype == DType::I32 && src.numel() == dst.numel())
      << "src and dst must be I32 of one length";
  const int64_t rows = x.dim(0), n = src.numel();
  const size_t row_bytes = rows == 0 ? 0 : x.bytes() / static_cast<size_t>(rows);
  const int32_t* s = src.as<int32_t>();
  const int32_t* d = dst.as<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    HELIUM_CHECK(op, s[i] >= 0 && s[i] < rows && d[i] >= 0 && d[i] < rows) << "index " << i << " out of range";
    for (int64_t j = 0; j < n; ++j) HELIUM_CHECK(op, d[i] != s[j]) << "dst row " << d[i] << " is also a src row";
  }
  auto* base = static_cast<uint8_t*>(x.data);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(base + static_cast<size_t>(d[i]) * row_bytes, base + static_cast<size_t>(s[i]) * row_bytes, row_bytes);
}

}  // namespace helium::cpu
