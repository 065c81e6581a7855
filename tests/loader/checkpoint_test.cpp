// Tests of load_checkpoint: sharded and single-file weights, and how a broken directory is reported.
#include "loader/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "loader_fixtures.h"

namespace helium {
namespace {

using testing_loader::expect_mentions;
using testing_loader::TempDir;
using testing_loader::write_bytes;

constexpr const char* kConfig = R"({"model_type": "llama", "hidden_size": 8, "eos_token_id": 2})";

// A three-shard checkpoint: shard k holds layer k's two weights (F32, BF16), the last one also the norm.
struct ShardedCheckpoint {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<uint16_t>> bf16;

  explicit ShardedCheckpoint(const TempDir& dir, const std::string& extra_index_entries = "") {
    write_bytes(dir.file("config.json"), kConfig);
    std::string weight_map;
    for (int k = 0; k < 3; ++k) {
      f32.emplace_back(8);
      bf16.emplace_back(6);
      for (int i = 0; i < 8; ++i) f32[k][i] = static_cast<float>(k * 100 + i);
      for (int i = 0; i < 6; ++i) bf16[k][i] = f32_to_bf16(static_cast<float>(-k - i));
      const std::string shard = shard_name(k);
      std::vector<TensorToWrite> tensors = {{layer(k) + "q.weight", DType::F32, {2, 4}, f32[k].data()},
                                            {layer(k) + "k.weight", DType::BF16, {3, 2}, bf16[k].data()}};
      if (k == 2) tensors.push_back({"model.norm.weight", DType::F32, {4}, f32[k].data()});
      EXPECT_TRUE(write_safetensors(dir.file(shard), tensors, {{"format", "pt"}}));
      for (const auto& t : tensors)
        weight_map += (weight_map.empty() ? "" : ", ") + ("\"" + t.name + "\": \"" + shard + "\"");
    }
    if (!extra_index_entries.empty()) weight_map += ", " + extra_index_entries;
    write_bytes(dir.file("model.safetensors.index.json"),
                R"({"metadata": {"total_size": 160}, "weight_map": {)" + weight_map + "}}");
  }
  static std::string shard_name(int k) {
    return "model-0000" + std::to_string(k + 1) + "-of-00003.safetensors";
  }
  static std::string layer(int k) { return "model.layers." + std::to_string(k) + ".attn."; }
};

std::string load_error(const std::string& dir) {
  auto ck = load_checkpoint(dir);
  return ck.is_ok() ? "" : ck.error_message();
}

TEST(Checkpoint, ThreeShardsWithIndex) {
  TempDir dir;
  ShardedCheckpoint made(dir);
  auto ck = load_checkpoint(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.error_message();
  EXPECT_EQ(ck->model_type, "llama");
  EXPECT_EQ(ck->dir, dir.path());
  EXPECT_TRUE(ck->warnings.empty());
  EXPECT_EQ(ck->weights.size(), 7u);
  EXPECT_EQ(ck->weights.total_bytes(), 3u * (32 + 12) + 16);
  EXPECT_EQ(ck->generation.eos_token_ids, std::vector<int32_t>{2})
      << "from config.json, no generation_config";
  for (int k = 0; k < 3; ++k) {
    const WeightInfo* q = ck->weights.find(ShardedCheckpoint::layer(k) + "q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(std::filesystem::path(q->file).filename(), ShardedCheckpoint::shard_name(k));
    EXPECT_EQ(std::memcmp(q->data, made.f32[k].data(), 32), 0);
    auto kt = ck->weights.get(ShardedCheckpoint::layer(k) + "k.weight", {3, 2});
    ASSERT_TRUE(kt.is_ok()) << kt.error_message();
    EXPECT_EQ(kt->dtype, DType::BF16);
    EXPECT_EQ(bf16_to_f32(kt->as<uint16_t>()[5]), static_cast<float>(-k - 5));
  }
}

TEST(Checkpoint, MissingShardNamesShardAndIndex) {
  TempDir dir;
  ShardedCheckpoint made(dir);
  std::filesystem::remove(dir.file(ShardedCheckpoint::shard_name(1)));
  expect_mentions(load_error(dir.path()),
                  {"model.safetensors.index.json", "shard 'model-00002-of-00003.safetensors' does not exist",
                   "model.layers.1.attn."});
}

TEST(Checkpoint, TensorListedInIndexButAbsentFromShard) {
  TempDir dir;
  ShardedCheckpoint made(dir, R"("lm_head.weight": "model-00003-of-00003.safetensors")");
  expect_mentions(load_error(dir.path()), {"model.safetensors.index.json: tensor 'lm_head.weight'",
                                           "model-00003-of-00003.safetensors does not contain it"});
}

TEST(Checkpoint, TensorFoundInAnotherShardThanListed) {
  TempDir dir;
  ShardedCheckpoint made(dir);
  // The index says shard 1 holds model.norm.weight; shard 3 really does. A later key wins in the JSON,
  // so rewrite the index wholesale.
  std::string index = R"({"weight_map": {"model.norm.weight": "model-00001-of-00003.safetensors")";
  for (int k = 0; k < 3; ++k)
    for (const char* w : {"q.weight", "k.weight"})
      index += ", \"" + ShardedCheckpoint::layer(k) + w + "\": \"" + ShardedCheckpoint::shard_name(k) + "\"";
  write_bytes(dir.file("model.safetensors.index.json"), index + "}}");
  expect_mentions(load_error(dir.path()), {"tensor 'model.norm.weight' is listed for shard "
                                           "'model-00001-of-00003.safetensors' but was found in",
                                           "model-00003-of-00003.safetensors"});
}

TEST(Checkpoint, ShardTensorMissingFromIndexLoadsWithAWarning) {
  TempDir dir;
  ShardedCheckpoint made(dir);
  const float extra[2] = {5, 6};
  // Rewrite shard 2 with one more tensor than the index lists.
  std::vector<TensorToWrite> tensors = {
      {ShardedCheckpoint::layer(1) + "q.weight", DType::F32, {2, 4}, made.f32[1].data()},
      {ShardedCheckpoint::layer(1) + "k.weight", DType::BF16, {3, 2}, made.bf16[1].data()},
      {"unlisted.bias", DType::F32, {2}, extra}};
  ASSERT_TRUE(write_safetensors(dir.file(ShardedCheckpoint::shard_name(1)), tensors));
  auto ck = load_checkpoint(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.error_message();
  ASSERT_EQ(ck->warnings.size(), 1u);
  expect_mentions(ck->warnings[0],
                  {"model-00002-of-00003.safetensors: tensor 'unlisted.bias' is not listed in",
                   "model.safetensors.index.json"});
  EXPECT_EQ(static_cast<const float*>(ck->weights.find("unlisted.bias")->data)[1], 6.0f);
}

TEST(Checkpoint, DuplicateTensorAcrossShardsNamesBoth) {
  TempDir dir;
  ShardedCheckpoint made(dir);
  // Shard 3 also carries layer 0's q.weight, which the index assigns to shard 1.
  std::vector<TensorToWrite> tensors = {
      {ShardedCheckpoint::layer(2) + "q.weight", DType::F32, {2, 4}, made.f32[2].data()},
      {ShardedCheckpoint::layer(2) + "k.weight", DType::BF16, {3, 2}, made.bf16[2].data()},
      {"model.norm.weight", DType::F32, {4}, made.f32[2].data()},
      {ShardedCheckpoint::layer(0) + "q.weight", DType::F32, {2, 4}, made.f32[2].data()}};
  ASSERT_TRUE(write_safetensors(dir.file(ShardedCheckpoint::shard_name(2)), tensors));
  expect_mentions(load_error(dir.path()),
                  {"model-00003-of-00003.safetensors: tensor 'model.layers.0.attn.q.weight' "
                   "is also in",
                   "model-00001-of-00003.safetensors"});
}

TEST(Checkpoint, ErrorInsideAShardPropagatesWithTheShardName) {
  TempDir dir;
  ShardedCheckpoint made(dir);
  write_bytes(dir.file(ShardedCheckpoint::shard_name(2)), "junk");
  expect_mentions(load_error(dir.path()), {"model-00003-of-00003.safetensors", "too short"});
}

TEST(Checkpoint, BadIndexFiles) {
  TempDir dir;
  write_bytes(dir.file("config.json"), kConfig);
  write_bytes(dir.file("model.safetensors.index.json"), "{\"weight_map\": ");
  expect_mentions(load_error(dir.path()), {"model.safetensors.index.json: invalid JSON"});
  write_bytes(dir.file("model.safetensors.index.json"), R"({"metadata": {}})");
  expect_mentions(load_error(dir.path()), {"model.safetensors.index.json: no \"weight_map\""});
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": 3}})");
  expect_mentions(load_error(dir.path()),
                  {"model.safetensors.index.json: tensor 'a': shard must be a file name"});
  write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {}})");
  expect_mentions(load_error(dir.path()), {"model.safetensors.index.json", "lists no tensors"});
  for (const char* escape : {"../outside.safetensors", "/etc/passwd", ""}) {
    write_bytes(dir.file("model.safetensors.index.json"),
                std::string(R"({"weight_map": {"a": ")") + escape + "\"}}");
    expect_mentions(load_error(dir.path()),
                    {"model.safetensors.index.json: tensor 'a'", "not a file name inside the checkpoint"});
  }
}

TEST(Checkpoint, SingleFileWithoutIndex) {
  TempDir dir;
  write_bytes(dir.file("config.json"), kConfig);
  const uint16_t h[3] = {f32_to_f16(1.0f), f32_to_f16(-0.5f), f32_to_f16(65504.0f)};
  ASSERT_TRUE(write_safetensors(dir.file("model.safetensors"), {{"embed", DType::F16, {1, 3}, h}}));
  auto ck = load_checkpoint(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.error_message();
  auto t = ck->weights.get("embed", {1, 3});
  ASSERT_TRUE(t.is_ok()) << t.error_message();
  EXPECT_EQ(f16_to_f32(t->as<uint16_t>()[2]), 65504.0f);
  EXPECT_EQ(ck->weights.origin(), dir.path());
}

TEST(Checkpoint, NoWeightsListsWhatWasLookedFor) {
  TempDir dir;
  write_bytes(dir.file("config.json"), kConfig);
  expect_mentions(load_error(dir.path()),
                  {dir.path(), "no weights", "model.safetensors.index.json", "model.safetensors"});
  write_bytes(dir.file("pytorch_model.bin"), "pickle");
  expect_mentions(load_error(dir.path()), {"'pytorch_model.bin'"});
}

TEST(Checkpoint, MissingOrBrokenConfig) {
  TempDir dir;
  expect_mentions(load_error(dir.path()), {"config.json", "cannot open"});
  write_bytes(dir.file("config.json"), "{\"model_type\": \"llama\",\n \"hidden_size\": }");
  expect_mentions(load_error(dir.path()), {"config.json: invalid JSON", "line 2"});
  expect_mentions(load_error(dir.file("nonexistent")), {"nonexistent", "not a directory"});
}

TEST(Checkpoint, GenerationConfigFileWins) {
  TempDir dir;
  ShardedCheckpoint made(dir);
  write_bytes(dir.file("generation_config.json"),
              R"({"eos_token_id": [7, 8], "temperature": 0.6, "top_k": 20})");
  auto ck = load_checkpoint(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.error_message();
  EXPECT_EQ(ck->generation.eos_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_FLOAT_EQ(ck->generation.temperature.value_or(0), 0.6f);
  EXPECT_EQ(ck->generation.top_k, 20);

  // Without eos_token_id of its own, config.json's still stops generation.
  write_bytes(dir.file("generation_config.json"), R"({"do_sample": true})");
  ck = load_checkpoint(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.error_message();
  EXPECT_EQ(ck->generation.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(ck->generation.do_sample, true);

  write_bytes(dir.file("generation_config.json"), R"({"top_p": "high"})");
  expect_mentions(load_error(dir.path()), {"generation_config.json: key \"top_p\" must be a finite number"});
}

TEST(Checkpoint, NestedTextConfigThroughTheDirectory) {
  TempDir dir;
  write_bytes(dir.file("config.json"),
              R"({"model_type": "gemma3", "eos_token_id": [1, 106], "torch_dtype": "bfloat16",
                  "text_config": {"model_type": "gemma3_text", "hidden_size": 8},
                  "vision_config": {"model_type": "siglip"}})");
  const float x = 1;
  ASSERT_TRUE(write_safetensors(dir.file("model.safetensors"), {{"w", DType::F32, {1}, &x}}));
  auto ck = load_checkpoint(dir.path());
  ASSERT_TRUE(ck.is_ok()) << ck.error_message();
  EXPECT_EQ(ck->model_type, "gemma3_text");
  EXPECT_EQ(ck->full_config["model_type"], "gemma3");
  EXPECT_EQ(ck->config["hidden_size"], 8);
  EXPECT_EQ(ck->generation.eos_token_ids, (std::vector<int32_t>{1, 106}));
}

}  // namespace
}  // namespace helium
