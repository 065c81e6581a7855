// Tests of the safetensors reader and writer: exact round trips, and one test per malformed input,
// each checking that the error names the file and the tensor at fault.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "loader_fixtures.h"

namespace helium {
namespace {

using testing_loader::expect_mentions;
using testing_loader::length_field;
using testing_loader::read_bytes;
using testing_loader::safetensors_bytes;
using testing_loader::TempDir;
using testing_loader::write_bytes;

// Bytes with a pattern that differs per tensor and per position, so a swapped or shifted tensor shows.
std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + 37 * i + (i >> 8));
  return v;
}

// Loads `bytes` written to `name` in `dir`; returns the error message ("" when it loaded).
std::string load_error(const TempDir& dir, const std::string& name, const std::string& bytes) {
  write_bytes(dir.file(name), bytes);
  WeightMap map;
  Status st = load_safetensors(dir.file(name), map);
  if (st.is_ok()) return "";
  EXPECT_EQ(map.size(), 0u) << "a failed load must leave the map as it was";
  return st.message();
}

TEST(SafetensorsWrite, ExactBytesOfASmallFile) {
  TempDir dir;
  const float values[2] = {1.0f, -2.0f};
  ASSERT_TRUE(write_safetensors(dir.file("a.safetensors"), {{"a", DType::F32, {2}, values}}));
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string expected = length_field(padded.size()) + padded;
  expected.append(reinterpret_cast<const char*>(values), sizeof values);
  EXPECT_EQ(read_bytes(dir.file("a.safetensors")), expected);
}

TEST(SafetensorsWrite, RoundTripEveryDTypeWithExactBytes) {
  TempDir dir;
  struct Case {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  // Odd sizes first, so later tensors start at offsets that are not multiples of their element size.
  const std::vector<Case> cases = {
      {"u8", DType::U8, {3}},         {"f16", DType::F16, {3, 5}},    {"bf16", DType::BF16, {7}},
      {"f32", DType::F32, {2, 3, 4}}, {"i32", DType::I32, {5}},       {"i64", DType::I64, {2, 3}},
      {"scalar", DType::F32, {}},     {"empty", DType::BF16, {0, 4}}, {"four_d", DType::F16, {1, 2, 3, 2}},
  };
  std::vector<std::vector<uint8_t>> data;
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < cases.size(); ++i) {
    size_t n = static_cast<size_t>(dtype_bytes(cases[i].dtype));
    for (int64_t d : cases[i].shape) n *= static_cast<size_t>(d);
    data.push_back(pattern_bytes(n, static_cast<uint8_t>(i * 11)));
  }
  for (size_t i = 0; i < cases.size(); ++i)
    tensors.push_back({cases[i].name, cases[i].dtype, cases[i].shape, data[i].data()});
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "round trip"}};
  const std::string path = dir.file("all.safetensors");
  ASSERT_TRUE(write_safetensors(path, tensors, metadata));

  const std::string file = read_bytes(path);
  ASSERT_GE(file.size(), 8u);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | static_cast<uint8_t>(file[i]);
  EXPECT_EQ(header_bytes % 8, 0u) << "the header is padded so the data region is 8-byte aligned";
  EXPECT_EQ(file[8], '{');
  // The data region is the tensors back to back, in the order given.
  std::string expected_data;
  for (const auto& d : data) expected_data.append(d.begin(), d.end());
  EXPECT_EQ(file.substr(8 + header_bytes), expected_data);

  auto header = parse_safetensors(reinterpret_cast<const uint8_t*>(file.data()), file.size(), path);
  ASSERT_TRUE(header.is_ok()) << header.error_message();
  EXPECT_EQ(header->metadata, metadata);
  ASSERT_EQ(header->tensors.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(header->tensors[i].name, cases[i].name) << "data order";

  WeightMap map;
  ASSERT_TRUE(load_safetensors(path, map));
  ASSERT_EQ(map.size(), cases.size());
  size_t total = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const WeightInfo* info = map.find(cases[i].name);
    ASSERT_NE(info, nullptr) << cases[i].name;
    EXPECT_EQ(info->file, path);
    EXPECT_EQ(info->dtype, cases[i].dtype);
    EXPECT_EQ(info->shape, cases[i].shape);
    ASSERT_EQ(info->bytes, data[i].size());
    if (info->bytes > 0) {
      EXPECT_EQ(std::memcmp(info->data, data[i].data(), info->bytes), 0) << cases[i].name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(info->data) % static_cast<uintptr_t>(dtype_bytes(info->dtype)),
                0u)
          << cases[i].name << " must be usable through a pointer of its element type";
    }
    total += info->bytes;
  }
  EXPECT_EQ(map.total_bytes(), total);
}

TEST(SafetensorsWrite, RejectsBadInput) {
  TempDir dir;
  const float x = 0;
  Status dup =
      write_safetensors(dir.file("d.safetensors"), {{"a", DType::F32, {1}, &x}, {"a", DType::F32, {1}, &x}});
  ASSERT_FALSE(dup.is_ok());
  expect_mentions(dup.message(), {"d.safetensors", "'a'", "twice"});
  Status neg = write_safetensors(dir.file("n.safetensors"), {{"b", DType::F32, {-1}, &x}});
  ASSERT_FALSE(neg.is_ok());
  expect_mentions(neg.message(), {"n.safetensors", "'b'", "negative"});
  Status nodir = write_safetensors(dir.file("missing/x.safetensors"), {{"c", DType::F32, {1}, &x}});
  ASSERT_FALSE(nodir.is_ok());
  expect_mentions(nodir.message(), {"missing/x.safetensors"});
}

// --- malformed files: one test per kind, each error names the file (and the tensor where one is at fault).

TEST(SafetensorsRead, FileShorterThanLengthField) {
  TempDir dir;
  std::string msg = load_error(dir, "short.safetensors", std::string("\x10\x00\x00", 3));
  expect_mentions(msg, {"short.safetensors", "3 bytes", "too short"});
  expect_mentions(load_error(dir, "empty.safetensors", ""), {"empty.safetensors", "0 bytes"});
}

TEST(SafetensorsRead, HeaderLengthLargerThanFile) {
  TempDir dir;
  std::string bytes = length_field(1000) + R"({"a":{}})";
  expect_mentions(load_error(dir, "big.safetensors", bytes),
                  {"big.safetensors", "header length 1000", "larger"});
}

TEST(SafetensorsRead, HeaderLengthAbsurd) {
  TempDir dir;
  std::string bytes = length_field(uint64_t{1} << 62) + R"({})";
  expect_mentions(load_error(dir, "absurd.safetensors", bytes), {"absurd.safetensors", "exceeds", "limit"});
  bytes = length_field(200'000'000) + R"({})";
  expect_mentions(load_error(dir, "absurd.safetensors", bytes), {"absurd.safetensors", "200000000"});
}

TEST(SafetensorsRead, HeaderNotJson) {
  TempDir dir;
  std::string msg = load_error(dir, "bad.safetensors", safetensors_bytes(R"({"a": {"dtype": F32}})", 0));
  expect_mentions(msg, {"bad.safetensors", "not valid JSON", "line 1, column"});
  msg = load_error(dir, "zero.safetensors", safetensors_bytes("", 0));
  expect_mentions(msg, {"zero.safetensors", "not valid JSON"});
  // JSON text never holds a raw NUL; the parser would take it as the end of input and ignore the rest.
  msg = load_error(dir, "nul.safetensors", safetensors_bytes(std::string("{}\0{\"x\": 1}", 11), 0));
  expect_mentions(msg, {"nul.safetensors", "not valid JSON", "NUL byte at offset 2"});
}

TEST(SafetensorsRead, HeaderNotAnObject) {
  TempDir dir;
  expect_mentions(load_error(dir, "arr.safetensors", safetensors_bytes("[1, 2]", 0)),
                  {"arr.safetensors", "must be a JSON object", "array"});
  expect_mentions(load_error(dir, "str.safetensors", safetensors_bytes("\"x\"", 0)),
                  {"str.safetensors", "string"});
}

TEST(SafetensorsRead, EntryMissingFields) {
  TempDir dir;
  expect_mentions(
      load_error(dir, "m.safetensors", safetensors_bytes(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4)),
      {"m.safetensors", "tensor 'w'", "no \"dtype\""});
  expect_mentions(
      load_error(dir, "m.safetensors", safetensors_bytes(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4)),
      {"m.safetensors", "tensor 'w'", "no \"shape\""});
  expect_mentions(
      load_error(dir, "m.safetensors", safetensors_bytes(R"({"w":{"dtype":"F32","shape":[1]}})", 4)),
      {"m.safetensors", "tensor 'w'", "no \"data_offsets\""});
}

TEST(SafetensorsRead, EntryWithWrongJsonTypes) {
  TempDir dir;
  struct Case {
    std::string header, expected;
  };
  const std::vector<Case> cases = {
      {R"({"w":7})", "entry must be an object"},
      {R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "\"dtype\" must be a string"},
      {R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", "\"shape\" must be an array"},
      {R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "shape[0] must be an integer"},
      {R"({"w":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", "shape[0] must be an integer"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "array of two integers"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":{"a":0}}})", "array of two integers"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})",
       "data_offsets[1] must be a non-negative"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",
       "data_offsets[0] must be a non-negative"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})",
       "data_offsets[1] must be a non-negative"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.header);
    expect_mentions(load_error(dir, "t.safetensors", safetensors_bytes(c.header, 4)),
                    {"t.safetensors: tensor 'w': ", c.expected});
  }
}

TEST(SafetensorsRead, NegativeDimension) {
  TempDir dir;
  std::string header = R"({"w":{"dtype":"F32","shape":[2,-2],"data_offsets":[0,16]}})";
  expect_mentions(load_error(dir, "neg.safetensors", safetensors_bytes(header, 16)),
                  {"neg.safetensors: tensor 'w': shape[1] = -2 is negative"});
}

TEST(SafetensorsRead, ReversedOffsetsMessageReadsAsSpecified) {
  TempDir dir;
  std::string header =
      R"({"model.layers.3.mlp.up_proj.weight":{"dtype":"U8","shape":[10],"data_offsets":[100,90]}})";
  std::string msg = load_error(dir, "model-00002-of-00003.safetensors", safetensors_bytes(header, 128));
  EXPECT_EQ(msg, dir.file("model-00002-of-00003.safetensors") +
                     ": tensor 'model.layers.3.mlp.up_proj.weight': data_offsets [100, 90] are reversed");
}

TEST(SafetensorsRead, TruncatedFile) {
  TempDir dir;
  std::vector<float> values(64, 1.5f);
  const std::string path = dir.file("trunc.safetensors");
  ASSERT_TRUE(write_safetensors(
      path, {{"first", DType::F32, {32}, values.data()}, {"second", DType::F32, {32}, values.data() + 32}}));
  std::string bytes = read_bytes(path);
  bytes.resize(bytes.size() - 10);
  expect_mentions(load_error(dir, "trunc.safetensors", bytes),
                  {"trunc.safetensors: tensor 'second'", "[128, 256]", "beyond the data region of 246 bytes",
                   "truncated"});
}

TEST(SafetensorsRead, ByteSizeDisagreesWithShape) {
  TempDir dir;
  std::string header = R"({"w":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,20]}})";
  expect_mentions(load_error(dir, "size.safetensors", safetensors_bytes(header, 24)),
                  {"size.safetensors: tensor 'w'", "hold 20 bytes", "[3, 4] of BF16 needs 24"});
}

TEST(SafetensorsRead, ShapeWhoseByteCountOverflows) {
  TempDir dir;
  std::string header = R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})";
  expect_mentions(load_error(dir, "ovf.safetensors", safetensors_bytes(header, 0)),
                  {"ovf.safetensors: tensor 'w'", "overflows"});
  header = R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]}})";
  expect_mentions(load_error(dir, "ovf.safetensors", safetensors_bytes(header, 0)),
                  {"ovf.safetensors: tensor 'w'", "too large"});
}

TEST(SafetensorsRead, OverlappingTensorsNameBoth) {
  TempDir dir;
  std::string header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                       R"("b":{"dtype":"F32","shape":[4],"data_offsets":[12,28]}})";
  expect_mentions(load_error(dir, "ov.safetensors", safetensors_bytes(header, 28)),
                  {"ov.safetensors: tensor 'b'", "overlap tensor 'a'", "[0, 16]"});
  // Same start: still an overlap, whichever sorts first.
  header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
           R"("b":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}})";
  expect_mentions(load_error(dir, "ov.safetensors", safetensors_bytes(header, 16)),
                  {"ov.safetensors", "overlap"});
}

TEST(SafetensorsRead, GapsAndEmptyTensorsAreAccepted) {
  TempDir dir;
  // 'a' ends at 8, 'b' starts at 16; 'e' is empty and sits inside 'b' without sharing a byte.
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                       R"("e":{"dtype":"F32","shape":[0],"data_offsets":[20,20]}})";
  EXPECT_EQ(load_error(dir, "gap.safetensors", safetensors_bytes(header, 32)), "");
  WeightMap map;
  ASSERT_TRUE(load_safetensors(dir.file("gap.safetensors"), map));
  const WeightInfo* b = map.find("b");
  ASSERT_NE(b, nullptr);
  const uint8_t* p = static_cast<const uint8_t*>(b->data);
  EXPECT_EQ(p[0], 16);  // safetensors_bytes fills the data region with its offsets
  EXPECT_EQ(p[7], 23);
}

TEST(SafetensorsRead, UnsupportedDTypeNamesFileTensorAndDType) {
  TempDir dir;
  std::string header = R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})";
  expect_mentions(load_error(dir, "fp8.safetensors", safetensors_bytes(header, 4)),
                  {"fp8.safetensors: tensor 'w': dtype 'F8_E4M3' is not supported", "BF16"});
}

TEST(SafetensorsRead, DuplicateNameInOneHeader) {
  TempDir dir;
  std::string header = R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                       R"("w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})";
  expect_mentions(load_error(dir, "dup.safetensors", safetensors_bytes(header, 8)),
                  {"dup.safetensors: tensor 'w' appears twice"});
}

TEST(SafetensorsRead, DuplicateNameAcrossFilesNamesBothAndKeepsTheFirst) {
  TempDir dir;
  const float one = 1.0f, two = 2.0f;
  ASSERT_TRUE(write_safetensors(dir.file("one.safetensors"), {{"w", DType::F32, {1}, &one}}));
  ASSERT_TRUE(write_safetensors(dir.file("two.safetensors"),
                                {{"other", DType::F32, {1}, &two}, {"w", DType::F32, {1}, &two}}));
  WeightMap map;
  ASSERT_TRUE(load_safetensors(dir.file("one.safetensors"), map));
  Status st = load_safetensors(dir.file("two.safetensors"), map);
  ASSERT_FALSE(st.is_ok());
  expect_mentions(st.message(), {"two.safetensors: tensor 'w' is also in", "one.safetensors"});
  EXPECT_EQ(map.size(), 1u) << "nothing of the failing file is added";
  EXPECT_EQ(*static_cast<const float*>(map.find("w")->data), 1.0f);
}

TEST(SafetensorsRead, BadMetadata) {
  TempDir dir;
  expect_mentions(load_error(dir, "md.safetensors", safetensors_bytes(R"({"__metadata__":{"format":3}})", 0)),
                  {"md.safetensors", "__metadata__", "'format'", "must be a string"});
  expect_mentions(load_error(dir, "md.safetensors", safetensors_bytes(R"({"__metadata__":[1]})", 0)),
                  {"md.safetensors", "__metadata__", "must be an object"});
}

TEST(SafetensorsRead, UnprintableNamesAreEscapedInMessages) {
  TempDir dir;
  std::string name = "bad\\u001b[2Jname" + std::string(500, 'x');  // JSON-escaped ESC
  std::string header = "{\"" + name + "\":{\"dtype\":\"F8_E5M2\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  std::string msg = load_error(dir, "esc.safetensors", safetensors_bytes(header, 1));
  expect_mentions(msg, {"esc.safetensors: tensor 'bad\\x1b[2Jname", "bytes)'"});
  EXPECT_EQ(msg.find('\x1b'), std::string::npos);
  EXPECT_LT(msg.size(), 500u) << "a long name is cut";
}

TEST(SafetensorsRead, DeeplyNestedHeaderDoesNotCrash) {
  TempDir dir;
  std::string header = std::string(200000, '[') + std::string(200000, ']');
  expect_mentions(load_error(dir, "deep.safetensors", safetensors_bytes(header, 0)),
                  {"deep.safetensors", "must be a JSON object"});
  header = "{\"a\":" + std::string(200000, '[');
  expect_mentions(load_error(dir, "deep.safetensors", safetensors_bytes(header, 0)),
                  {"deep.safetensors", "not valid JSON"});
}

TEST(SafetensorsRead, NotARegularFile) {
  TempDir dir;
  WeightMap map;
  Status st = load_safetensors(dir.path(), map);
  ASSERT_FALSE(st.is_ok());
  expect_mentions(st.message(), {dir.path()});
  st = load_safetensors(dir.file("absent.safetensors"), map);
  ASSERT_FALSE(st.is_ok());
  expect_mentions(st.message(), {"absent.safetensors"});
}

TEST(SafetensorsRead, HeaderWithUnpaddedLengthStillAlignsTensors) {
  // A writer that does not pad: the data region starts at an odd address, so every tensor is copied.
  TempDir dir;
  std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  EXPECT_EQ(load_error(dir, "odd.safetensors", safetensors_bytes(header, 12)), "");
  WeightMap map;
  ASSERT_TRUE(load_safetensors(dir.file("odd.safetensors"), map));
  const WeightInfo* w = map.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 4, 0u);
  const uint8_t* p = static_cast<const uint8_t*>(w->data);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(p[i], i);
}

}  // namespace
}  // namespace helium
