#include <string>

#include "backend/backend.h"

namespace helium {

std::string Tensor::shape_string() const {
  std::string s = "(";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ") " + std::string(dtype_name(dtype));
}

void Backend::matmul_split(const Tensor& x, const Tensor& w, const Tensor& bias, std::span<const Tensor> ys) {
  int64_t offset = 0;
  for (const Tensor& y : ys) {
    const int64_t n = y.shape[y.rank - 1];
    Tensor wi = w.rows_from(offset).first_rows(n);
    Tensor bi;
    if (bias.rank != 0) bi = Tensor(static_cast<uint8_t*>(bias.data) + offset * dtype_bytes(bias.dtype), bias.dtype, {n});
    matmul(x, wi, bi, y);
    offset += n;
  }
}

void Backend::matmul_add(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor scratch, Tensor y) {
  matmul(x, w, bias, scratch);
  add(y, scratch, y);
}

}  // namespace helium
