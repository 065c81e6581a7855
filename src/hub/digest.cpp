// hub/digest.cpp — SHA-256 and SHA-1 written from FIPS 180-4 (sections 6.1 and 6.2). Each download thread
// hashes its own file as it arrives, and `helium pull` re-hashes cached blobs, so SHA-256 speed matters:
// portable C++ runs at about 270 MB/s a core on the development machine; where the CPU has the x86 SHA
// extensions (chosen at run time) the same work runs several times faster.
#include "hub/digest.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace helium {
namespace {

constexpr uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}
constexpr uint32_t rotl(uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

uint32_t load_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

std::string to_hex(const uint32_t* words, int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(n) * 8);
  for (int i = 0; i < n; ++i)
    for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kDigits[(words[i] >> shift) & 0xf]);
  return out;
}

// The padding both hashes share: 0x80, zeros to 56 mod 64, then the length in bits, big-endian.
template <class Hash>
void pad_and_finish(Hash& h, uint64_t total_bytes) {
  uint8_t tail[72] = {0x80};
  const size_t used = total_bytes % 64;
  const size_t zeros = (used < 56 ? 56 - used : 120 - used);
  const uint64_t bits = total_bytes * 8;
  for (int i = 0; i < 8; ++i)
    tail[zeros + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  h.update(tail, zeros + 8);
}

constexpr uint32_t kSha256K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

}  // namespace

namespace {

// The portable compression function, block by block.
void sha256_blocks_portable(uint32_t* state, const uint8_t* block, size_t count) {
  for (; count > 0; --count, block += 64) {
    uint32_t w[64];
    for (int t = 0; t < 16; ++t) w[t] = load_be32(block + 4 * t);
    for (int t = 16; t < 64; ++t) {
      const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; ++t) {
      const uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kSha256K[t] + w[t];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#if defined(__x86_64__)
// The SHA extensions: sha256rnds2 does two rounds on the state held as (A,B,E,F) and (C,D,G,H) (A in the
// top lane), sha256msg1/msg2 extend the message schedule four words at a time. Checked against the
// portable function by digest_test.
__attribute__((target("sha,sse4.1,ssse3"))) void sha256_blocks_sha_extensions(uint32_t* state,
                                                                              const uint8_t* block,
                                                                              size_t count) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  // (A,B,C,D),(E,F,G,H) in memory order -> the (A,B,E,F) and (C,D,G,H) lane orders the instructions use.
  __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)), 0xB1);
  __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), 0x1B);
  __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);
  for (; count > 0; --count, block += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i w[4];  // w[g % 4] holds message words 4g..4g+3 (then 4(g+4).. once extended)
    for (int i = 0; i < 4; ++i)
      w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i)), byte_swap);
    for (int g = 0; g < 16; ++g) {
      __m128i& cur = w[g & 3];
      if (g >= 4) {
        // W[t..t+3] = W[t-16..] + s0(W[t-15..]) + W[t-7..] + s1(W[t-2..]), t = 4g.
        __m128i x = _mm_sha256msg1_epu32(cur, w[(g - 3) & 3]);
        x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g - 1) & 3], w[(g - 2) & 3], 4));
        cur = _mm_sha256msg2_epu32(x, w[(g - 1) & 3]);
      }
      __m128i wk = _mm_add_epi32(cur, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSha256K + 4 * g)));
      // Two rounds turn (A,B,E,F) into the next (C,D,G,H): the two variables trade roles and trade back.
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      wk = _mm_shuffle_epi32(wk, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}

bool cpu_has_sha_extensions() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & bit_SHA) != 0;
}
#endif

}  // namespace

bool Sha256::hardware_accelerated() {
#if defined(__x86_64__)
  static const bool has = cpu_has_sha_extensions();
  return has;
#else
  return false;
#endif
}

Sha256::Sha256(Implementation implementation)
    : compress_(&sha256_blocks_portable), state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {
#if defined(__x86_64__)
  if (implementation == Implementation::Auto && hardware_accelerated())
    compress_ = &sha256_blocks_sha_extensions;
#else
  (void)implementation;
#endif
}

template <class Compress>
void HashBlocks::consume(const void* data, size_t bytes, Compress&& compress) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_bytes_ += bytes;
  if (buffered_ > 0) {
    const size_t take = std::min(bytes, 64 - buffered_);
    std::memcpy(buffer_.data() + buffered_, p, take);
    buffered_ += take;
    p += take;
    bytes -= take;
    if (buffered_ < 64) return;
    compress(buffer_.data(), size_t{1});
    buffered_ = 0;
  }
  if (bytes >= 64) compress(p, bytes / 64);
  p += bytes / 64 * 64;
  bytes %= 64;
  std::memcpy(buffer_.data(), p, bytes);
  buffered_ = bytes;
}

void Sha256::update(const void* data, size_t bytes) {
  blocks_.consume(data, bytes, [this](const uint8_t* b, size_t count) { compress_(state_.data(), b, count); });
}

std::string Sha256::hex_digest() {
  const uint64_t total = blocks_.total_bytes();
  pad_and_finish(*this, total);
  return to_hex(state_.data(), 8);
}

Sha1::Sha1() : state_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0} {}

void Sha1::compress(const uint8_t* block) {
  uint32_t w[80];
  for (int t = 0; t < 16; ++t) w[t] = load_be32(block + 4 * t);
  for (int t = 16; t < 80; ++t) w[t] = rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4];
  for (int t = 0; t < 80; ++t) {
    uint32_t f, k;
    if (t < 20) {
      f = (b & c) | (~b & d);
      k = 0x5a827999;
    } else if (t < 40) {
      f = b ^ c ^ d;
      k = 0x6ed9eba1;
    } else if (t < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8f1bbcdc;
    } else {
      f = b ^ c ^ d;
      k = 0xca62c1d6;
    }
    const uint32_t temp = rotl(a, 5) + f + e + k + w[t];
    e = d;
    d = c;
    c = rotl(b, 30);
    b = a;
    a = temp;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
}

void Sha1::update(const void* data, size_t bytes) {
  blocks_.consume(data, bytes, [this](const uint8_t* b, size_t count) {
    for (; count > 0; --count, b += 64) compress(b);
  });
}

std::string Sha1::hex_digest() {
  const uint64_t total = blocks_.total_bytes();
  pad_and_finish(*this, total);
  return to_hex(state_.data(), 5);
}

namespace {

// Feeds the first `limit` bytes of `path` (all when limit < 0) to `sink`; returns the bytes read.
template <class Sink>
Result<int64_t> read_file_into(const std::string& path, int64_t limit, Sink&& sink) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::error(path + ": cannot open: " + std::strerror(errno));
  std::vector<char> buf(size_t{4} << 20);
  int64_t done = 0;
  while (limit < 0 || done < limit) {
    size_t want = buf.size();
    if (limit >= 0) want = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(want), limit - done));
    const size_t n = std::fread(buf.data(), 1, want, f.get());
    if (n == 0) break;
    sink(buf.data(), n);
    done += static_cast<int64_t>(n);
  }
  if (std::ferror(f.get())) return Status::error(path + ": read error: " + std::strerror(errno));
  if (limit >= 0 && done < limit)
    return Status::error(path + ": has " + std::to_string(done) + " bytes, expected at least " +
                         std::to_string(limit));
  return done;
}

}  // namespace

Result<std::string> sha256_of_file(const std::string& path, int64_t bytes) {
  Sha256 h;
  HELIUM_ASSIGN_OR_RETURN(int64_t n,
                          read_file_into(path, bytes, [&](const char* p, size_t k) { h.update(p, k); }));
  (void)n;
  return h.hex_digest();
}

Result<std::string> git_blob_sha1_of_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::error(path + ": cannot open: " + std::strerror(errno));
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fclose(f);
  if (size < 0) return Status::error(path + ": cannot read its size");
  Sha1 h;
  std::string header = "blob ";
  header += std::to_string(size);
  header.push_back('\0');
  h.update(header);
  HELIUM_ASSIGN_OR_RETURN(int64_t n,
                          read_file_into(path, size, [&](const char* p, size_t k) { h.update(p, k); }));
  (void)n;
  return h.hex_digest();
}

}  // namespace helium
