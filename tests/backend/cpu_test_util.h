// tests/backend/cpu_test_util.h — shared pieces of the CPU backend tests: the ISA parameter (skipping ISAs
// this CPU lacks), random data in every dtype with the exact f32 values a kernel sees, and tensor views.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"

namespace helium {
// Prints a CpuIsa test parameter by name instead of as bytes.
inline void PrintTo(CpuIsa isa, std::ostream* os) { *os << cpu_isa_name(isa); }
}  // namespace helium

namespace helium::test {

// f32 unit roundoff (half an ulp of 1): the bound on the relative error of one rounded f32 operation.
constexpr double kF32Unit = 1.0 / (1 << 24);

inline std::vector<CpuIsa> all_isas() { return {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512}; }
inline std::string isa_param_name(const testing::TestParamInfo<CpuIsa>& info) {
  return std::string(cpu_isa_name(info.param));
}

// Skips the test when `isa` is above what this machine runs: what the CPU supports, or lower when
// HELIUM_CPU_ISA asks (so CI can exercise a machine without AVX-512 on one that has it).
inline bool isa_available(CpuIsa isa, std::string* why) {
  Result<CpuIsa> ceiling = default_cpu_isa();
  if (!ceiling) {
    *why = ceiling.error_message();
    return false;
  }
  if (static_cast<int>(isa) > static_cast<int>(*ceiling)) {
    *why = "this CPU (or HELIUM_CPU_ISA) allows at most " + std::string(cpu_isa_name(*ceiling)) + ", not " +
           std::string(cpu_isa_name(isa));
    return false;
  }
  return true;
}

#define HELIUM_SKIP_IF_ISA_UNAVAILABLE(isa)                                         \
  do {                                                                              \
    std::string helium_why_;                                                        \
    if (!::helium::test::isa_available((isa), &helium_why_)) GTEST_SKIP() << helium_why_; \
  } while (0)

// A test parameterised by the ISA under test.
class CpuIsaTest : public testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override { HELIUM_SKIP_IF_ISA_UNAVAILABLE(GetParam()); }
  std::unique_ptr<CpuBackend> backend(int threads = 2) const {
    return std::make_unique<CpuBackend>(threads, GetParam());
  }
};

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

inline float round_to(DType dtype, float f) {
  switch (dtype) {
    case DType::F16: return f16_to_f32(f32_to_f16(f));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(f));
    default: return f;
  }
}

// Values stored in a dtype (bytes) together with their exact f32 values (what a kernel converts them to).
struct TypedData {
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;
  std::vector<float> values;

  TypedData() = default;
  TypedData(DType dtype_, const std::vector<float>& source) : dtype(dtype_), bytes(source.size() * dtype_bytes(dtype_)) {
    values.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      const float f = source[i];
      if (dtype == DType::F32) {
        std::memcpy(bytes.data() + 4 * i, &f, 4);
      } else {
        const uint16_t h = dtype == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
      values.push_back(round_to(dtype, f));
    }
  }
  Tensor tensor(std::initializer_list<int64_t> dims) { return Tensor(bytes.data(), dtype, dims); }
};

inline Tensor view(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, dims);
}
inline Tensor view(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::I32, dims);
}

inline bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace helium::test
