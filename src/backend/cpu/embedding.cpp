// backend/cpu/embedding.cpp — out(rows, dim) = table[ids]: a row copy with conversion to f32 (exact for
// every table dtype), so one scalar kernel serves every ISA.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/ops.h"

namespace helium::cpu {

namespace {

constexpr int64_t kMinElementsPerThread = 64 * 1024;

void embedding_row(const void* table_row, DType dtype, int64_t dim, float* out) {
  const auto* h = static_cast<const uint16_t*>(table_row);
  switch (dtype) {
    case DType::F16:
      for (int64_t i = 0; i < dim; ++i) out[i] = f16_to_f32(h[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < dim; ++i) out[i] = bf16_to_f32(h[i]);
      break;
    default: std::memcpy(out, table_row, static_cast<size_t>(dim) * sizeof(float));
  }
}

}  // namespace

void embedding(const CpuContext& ctx, const Tensor& table, const Tensor& ids, const Tensor& out) {
  const OpDescription op("embedding", {{"table", &table}, {"ids", &ids}, {"out", &out}});
  HELIUM_CHECK(op, table.data != nullptr && ids.data != nullptr && out.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, table.rank == 2 && is_float_weight(table.dtype)) << "table must be (vocab, dim) F32/F16/BF16";
  HELIUM_CHECK(op, ids.dtype == DType::I32) << "ids must be I32";
  const int64_t vocab = table.dim(0), dim = table.dim(1), rows = ids.numel();
  HELIUM_CHECK(op, out.dtype == DType::F32 && matrix_cols(out) == dim && matrix_rows(out) == rows)
      << "out must be (rows, dim) F32";
  HELIUM_CHECK(op, !tensors_overlap(out, table) && !tensors_overlap(out, ids)) << "out overlaps an input";
  const int32_t* id = ids.as<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    HELIUM_CHECK(op, id[r] >= 0 && id[r] < vocab) << "ids[" << r << "] = " << id[r] << " outside [0, " << vocab << ")";
  if (rows == 0 || dim == 0) return;

  const size_t row_bytes = static_cast<size_t>(dim) * dtype_bytes(table.dtype);
  parallel_for(ctx.pool, rows, std::max<int64_t>(1, kMinElementsPerThread / dim), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      embedding_row(static_cast<const uint8_t*>(table.data) + static_cast<size_t>(id[r]) * row_bytes, table.dtype,
                    dim, out.as<float>() + r * dim);
  });
}

void embedding_from(const CpuContext& ctx, const Tensor& table, const Tensor& ids, const Tensor& sources,
                    const Tensor& previous, const Tensor& out) {
  const OpDescription op("embedding_from", {{"ids", &ids}, {"sources", &sources}, {"previous", &previous}});
  HELIUM_CHECK(op, ids.data != nullptr && sources.data != nullptr) << "null tensor";
  HELIUM_CHECK(op, ids.dtype == DType::I32 && sources.dtype == DType::I32 && sources.numel() == ids.numel())
      << "ids and sources must be (rows) I32";
  HELIUM_CHECK(op, previous.dtype == DType::I32) << "previous must be I32";
  std::vector<int32_t> resolved(ids.as<int32_t>(), ids.as<int32_t>() + ids.numel());
  const int32_t* from = sources.as<int32_t>();
  for (size_t r = 0; r < resolved.size(); ++r) {
    if (from[r] < 0) continue;
    HELIUM_CHECK(op, from[r] < previous.numel() && previous.data != nullptr)
        << "sources[" << r << "] = " << from[r] << " outside previous's " << previous.numel() << " ids";
    resolved[r] = previous.as<int32_t>()[from[r]];
  }
  embedding(ctx, table, Tensor(resolved.data(), DType::I32, {ids.numel()}), out);
}

}  // namespace helium::cpu
