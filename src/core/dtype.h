// core/dtype.h — the one table of facts about element types, and scalar conversions.
// Owns: DType, its size and name, bf16/f16 <-> f32 conversion. Must not: know about files or devices.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace helium {

enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8, F64 };

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // as in safetensors headers: "F32", "F16", "BF16", ...
  int bytes;
};

inline constexpr DTypeInfo kDTypeTable[] = {
    {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4}, {DType::I64, "I64", 8}, {DType::U8, "U8", 1}, {DType::F64, "F64", 8},
};

constexpr const DTypeInfo& dtype_info(DType t) { return kDTypeTable[static_cast<int>(t)]; }
constexpr int dtype_bytes(DType t) { return dtype_info(t).bytes; }
constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }
inline std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kDTypeTable)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even with overflow to infinity.
inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (abs < 0x38800000u) {                                                // subnormal or zero in f16
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t q = mant >> shift;
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace helium
