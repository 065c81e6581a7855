// tests/loader/loader_fixtures.h — temp directories and hand-built files for the loader tests. Every
// fixture is made by the test that uses it; nothing is read from the repository.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

namespace helium::testing_loader {

// A fresh directory under the system temp dir, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "helium-loader-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write fixture " << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The 8-byte little-endian length field of a safetensors file.
inline std::string length_field(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file by hand: length field, `header` verbatim (no padding), then `data_bytes` bytes
// counting up from 0 (mod 256).
inline std::string safetensors_bytes(const std::string& header, size_t data_bytes) {
  std::string s = length_field(header.size()) + header;
  for (size_t i = 0; i < data_bytes; ++i) s.push_back(static_cast<char>(i & 0xff));
  return s;
}

// Asserts that `message` contains every one of `parts`, printing the whole message when not.
inline void expect_mentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "message lacks \"" << part << "\":\n  " << message;
}

}  // namespace helium::testing_loader
