// hub/digest.h — SHA-256 and SHA-1 (FIPS 180-4), streaming, to verify downloaded files: the Hub names an
// LFS file by the SHA-256 of its bytes, and a regular git file by the SHA-1 of "blob <size>\0<bytes>".
// Owns: the two hash functions and a file helper. Must not: know about HTTP, caches or catalogs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace helium {

// The 64-byte block buffering both hashes share: consume() hands the whole blocks of the stream so far to
// a compression function and keeps the rest for the next call (digest.cpp).
class HashBlocks {
 public:
  template <class Compress>  // compress(const uint8_t* blocks, size_t count)
  void consume(const void* data, size_t bytes, Compress&& compress);
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

class Sha256 {
 public:
  // Auto: the x86 SHA extensions when the CPU has them (several times faster), else portable C++.
  enum class Implementation { Auto, Portable };
  explicit Sha256(Implementation implementation = Implementation::Auto);
  // Whether Auto uses the SHA extensions on this machine.
  static bool hardware_accelerated();
  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The digest as 64 lowercase hex digits. The object must not be updated afterwards.
  std::string hex_digest();

 private:
  void (*compress_)(uint32_t* state, const uint8_t* blocks, size_t count);
  std::array<uint32_t, 8> state_;
  HashBlocks blocks_;
};

class Sha1 {
 public:
  Sha1();
  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The digest as 40 lowercase hex digits. The object must not be updated afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 5> state_;
  HashBlocks blocks_;
};

// SHA-256 of the first `bytes` bytes of a file (the whole file when bytes < 0), read in 4 MiB pieces.
Result<std::string> sha256_of_file(const std::string& path, int64_t bytes = -1);
// Git's object id of a file's content: SHA-1 of "blob <size>\0" followed by the bytes.
Result<std::string> git_blob_sha1_of_file(const std::string& path);

}  // namespace helium
