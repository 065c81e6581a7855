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

}  // namespace helium
