// backend/cpu/swiglu.h — the swiglu kernels' shared contract (entry and scalar kernel in swiglu.cpp).
// Must not: hold inline code or include backend.h (compiled with each ISA's flags; see matmul.h).
#pragma once

#include <cstdint>

namespace helium::cpu {

// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i] for i in [0, count). Every element goes through the same
// code whatever its index (SIMD tails are padded, not finished in scalar code), so the result does not
// depend on how the elements were split. out may be gate.
using SwigluKernel = void (*)(const float* gate, const float* up, float* out, int64_t count);

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t count);
namespace avx2 {
void swiglu(const float* gate, const float* up, float* out, int64_t count);
}
namespace avx512 {
void swiglu(const float* gate, const float* up, float* out, int64_t count);
}

}  // namespace helium::cpu
