// SHA-256 and SHA-1 against the FIPS 180-2 known answers, git's blob ids, and streaming in odd pieces.
#include "hub/digest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace helium {
namespace {

std::string sha256(const std::string& s) {
  Sha256 h;
  h.update(s);
  return h.hex_digest();
}

std::string sha1(const std::string& s) {
  Sha1 h;
  h.update(s);
  return h.hex_digest();
}

TEST(Digest, Sha256KnownAnswers) {
  EXPECT_EQ(sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Digest, Sha1KnownAnswers) {
  EXPECT_EQ(sha1(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(sha1("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(sha1(std::string(1000000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

// Every split of the input into two updates gives the one-shot digest (block-boundary handling).
TEST(Digest, StreamingInPiecesEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  const std::string whole256 = sha256(data), whole1 = sha1(data);
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    Sha256 a;
    a.update(data.data(), cut);
    a.update(data.data() + cut, data.size() - cut);
    ASSERT_EQ(a.hex_digest(), whole256) << cut;
    Sha1 b;
    b.update(data.data(), cut);
    b.update(data.data() + cut, data.size() - cut);
    ASSERT_EQ(b.hex_digest(), whole1) << cut;
  }
}

// The SHA-extension path (used when the CPU has it) equals the portable one on every length around the
// block boundaries and on a long input.
TEST(Digest, HardwareSha256EqualsPortable) {
  std::printf("SHA extensions on this CPU: %s\n", Sha256::hardware_accelerated() ? "yes" : "no");
  std::string data;
  for (int i = 0; i < 5000; ++i) data.push_back(static_cast<char>((i * 131) ^ (i >> 3)));
  for (size_t n : {size_t{0}, size_t{1}, size_t{55}, size_t{56}, size_t{63}, size_t{64}, size_t{65},
                   size_t{119}, size_t{128}, size_t{1000}, size_t{4097}, data.size()}) {
    Sha256 hw, sw(Sha256::Implementation::Portable);
    hw.update(data.data(), n);
    sw.update(data.data(), n);
    ASSERT_EQ(hw.hex_digest(), sw.hex_digest()) << n;
  }
  Sha256 sw(Sha256::Implementation::Portable);
  sw.update("abc");
  EXPECT_EQ(sw.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Digest, FilesAndGitBlobIds) {
  const std::string path = ::testing::TempDir() + "digest_" + std::to_string(::getpid()) + ".txt";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("hello world\n", f);
  std::fclose(f);
  // `echo 'hello world' | git hash-object --stdin`
  EXPECT_EQ(git_blob_sha1_of_file(path).value(), "3b18e512dba79e4c8300dd08aeb37f8e728b8dad");
  EXPECT_EQ(sha256_of_file(path).value(), sha256("hello world\n"));
  EXPECT_EQ(sha256_of_file(path, 5).value(), sha256("hello"));
  EXPECT_FALSE(sha256_of_file(path, 100).is_ok());  // shorter than asked
  std::remove(path.c_str());
  auto missing = sha256_of_file(path);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.error_message().find(path), std::string::npos);
}

}  // namespace
}  // namespace helium
