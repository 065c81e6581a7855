// Tests of WeightMap lookups: the view it returns and the messages of failed lookups.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "loader_fixtures.h"

namespace helium {
namespace {

using testing_loader::expect_mentions;

WeightMap small_map(const std::vector<float>& f32, const std::vector<int32_t>& ids) {
  WeightMap map;
  map.set_origin("/models/tiny");
  map.add({"model.embed_tokens.weight",
           "/models/tiny/model.safetensors",
           DType::F32,
           {3, 2},
           f32.data(),
           f32.size() * 4});
  map.add(
      {"model.position_ids", "/models/tiny/model.safetensors", DType::I32, {4}, ids.data(), ids.size() * 4});
  map.add(
      {"five_d", "/models/tiny/model.safetensors", DType::F32, {1, 1, 1, 1, 6}, f32.data(), f32.size() * 4});
  return map;
}

TEST(WeightMap, GetReturnsAViewOfTheBytes) {
  std::vector<float> f32 = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> ids = {0, 1, 2, 3};
  WeightMap map = small_map(f32, ids);
  auto t = map.get("model.embed_tokens.weight", {3, 2});
  ASSERT_TRUE(t.is_ok()) << t.error_message();
  EXPECT_EQ(t->data, f32.data());
  EXPECT_EQ(t->dtype, DType::F32);
  EXPECT_EQ(t->rank, 2);
  EXPECT_EQ(t->dim(0), 3);
  EXPECT_EQ(t->dim(1), 2);
  EXPECT_EQ(t->bytes(), 24u);
  EXPECT_TRUE(map.contains("model.position_ids"));
  EXPECT_FALSE(map.contains("lm_head.weight"));
  EXPECT_EQ(map.names(),
            (std::vector<std::string>{"five_d", "model.embed_tokens.weight", "model.position_ids"}));
}

TEST(WeightMap, MissingTensorNamesTensorAndCheckpoint) {
  std::vector<float> f32(6);
  std::vector<int32_t> ids(4);
  auto t = small_map(f32, ids).get("lm_head.weight", {3, 2});
  ASSERT_FALSE(t.is_ok());
  expect_mentions(t.error_message(), {"/models/tiny", "tensor 'lm_head.weight' not found"});
}

TEST(WeightMap, ShapeMismatchGivesExpectedAndActual) {
  std::vector<float> f32(6);
  std::vector<int32_t> ids(4);
  auto t = small_map(f32, ids).get("model.embed_tokens.weight", {2, 3});
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.error_message(),
            "/models/tiny/model.safetensors: tensor 'model.embed_tokens.weight' has shape "
            "[3, 2] but [2, 3] was expected");
}

TEST(WeightMap, NonFloatDTypeIsRefused) {
  std::vector<float> f32(6);
  std::vector<int32_t> ids(4);
  auto t = small_map(f32, ids).get("model.position_ids", {4});
  ASSERT_FALSE(t.is_ok());
  expect_mentions(t.error_message(),
                  {"model.safetensors: tensor 'model.position_ids' has dtype I32", "float dtype"});
}

TEST(WeightMap, RankAboveFourIsRefused) {
  std::vector<float> f32(6);
  std::vector<int32_t> ids(4);
  auto t = small_map(f32, ids).get("five_d", {1, 1, 1, 1, 6});
  ASSERT_FALSE(t.is_ok());
  expect_mentions(t.error_message(), {"tensor 'five_d' has rank 5"});
}

}  // namespace
}  // namespace helium
