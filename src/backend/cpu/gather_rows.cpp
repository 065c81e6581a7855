// backend/cpu/gather_rows.cpp — out(n, dim) = x[index]: row copies of any dtype (e.g. the rows whose
// logits are needed). A copy is exact, so one kernel serves every ISA.
#include <algorithm>
#include <cstring>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

void gather_rows(const CpuContext& ctx, const Tensor& x, const Tensor& index, const Tensor& out) {
  const OpDescription op("gather_rows", {{"x", &x}, {"index", &index}, {"out", &out}});
  HELIUM_CHECK(op, x.data != nullptr && index.data != nullptr && out.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, index.dtype == DType::I32) << "index must be I32";
  HELIUM_CHECK(op, x.rank >= 1 && out.rank >= 1) << "x and out must have rows";
  const int64_t rows = x.dim(0), n = index.numel();
  const int64_t row_elements = rows == 0 ? 0 : x.numel() / rows;
  HELIUM_CHECK(op, out.dtype == x.dtype && out.dim(0) == n && out.numel() == n * row_elements)
      << "out must be (n, dim) of x's dtype";
  HELIUM_CHECK(op, !tensors_overlap(out, x) && !tensors_overlap(out, index)) << "out overlaps an input";
  const int32_t* idx = index.as<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    HELIUM_CHECK(op, idx[i] >= 0 && idx[i] < rows) << "index[" << i << "] = " << idx[i] << " outside [0, " << rows << ")";

  const size_t row_bytes = static_cast<size_t>(row_elements) * dtype_bytes(x.dtype);
  if (n == 0 || row_bytes == 0) return;
  parallel_for(ctx.pool, n, std::max<int64_t>(1, static_cast<int64_t>((256 * 1024) / row_bytes)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i)
                   std::memcpy(static_cast<uint8_t*>(out.data) + static_cast<size_t>(i) * row_bytes,
                               static_cast<const uint8_t*>(x.data) + static_cast<size_t>(idx[i]) * row_bytes,
                               row_bytes);
               });
}

}  // namespace helium::cpu
