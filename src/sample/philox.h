// sample/philox.h — the counter-based random numbers behind seed-exact sampling (DESIGN.md invariant 1).
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): the number for
// (seed, position) is a pure function of the two, so speculative verification and plain decoding draw
// the same number for the same token position, on any backend, in any order.
#pragma once

#include <array>
#include <cstdint>

namespace helium {

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

// A uniform double in [0, 1) with 53 random bits, for token position `position` under `seed`.
inline double philox_uniform(uint64_t seed, uint64_t position) {
  auto out = philox4x32_10({static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), 0, 0},
                           {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  uint64_t bits = (static_cast<uint64_t>(out[0]) << 21) ^ (out[1] >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

}  // namespace helium
