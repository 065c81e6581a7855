// Interoperability with the reference safetensors writer: the tiny golden checkpoints under tests/data
// were written by Hugging Face transformers (see tools/goldens/), so they check the reader against files
// we did not write, and the writer against the reference writer's exact bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "loader_fixtures.h"

namespace helium {
namespace {

using testing_loader::read_bytes;
using testing_loader::TempDir;

const std::string kModels = std::string(HELIUM_SOURCE_DIR) + "/tests/data/models";

// The golden checkpoints belong to the models tests; without them there is nothing to compare with.
#define SKIP_WITHOUT_GOLDENS(name)                                       \
  if (!std::filesystem::exists(kModels + "/" + (name) + "/config.json")) \
  GTEST_SKIP() << "no golden checkpoint " << kModels << "/" << (name)

TEST(Interop, LoadsReferenceCheckpoints) {
  for (const std::string name : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    SCOPED_TRACE(name);
    SKIP_WITHOUT_GOLDENS(name);
    auto ck = load_checkpoint(kModels + "/" + name);
    ASSERT_TRUE(ck.is_ok()) << ck.error_message();
    EXPECT_EQ(ck->model_type, name.substr(5));
    EXPECT_TRUE(ck->warnings.empty());
    EXPECT_FALSE(ck->generation.eos_token_ids.empty());
    EXPECT_GT(ck->weights.size(), 10u);
    const WeightInfo* embed = ck->weights.find("model.embed_tokens.weight");
    ASSERT_NE(embed, nullptr);
    const int64_t hidden = ck->config["hidden_size"].get<int64_t>();
    const int64_t vocab = ck->config["vocab_size"].get<int64_t>();
    auto t = ck->weights.get("model.embed_tokens.weight", {vocab, hidden});
    ASSERT_TRUE(t.is_ok()) << t.error_message();
  }
}

TEST(Interop, ShardedReferenceCheckpointMatchesItsIndex) {
  SKIP_WITHOUT_GOLDENS("tiny-qwen3");
  const std::string dir = kModels + "/tiny-qwen3";
  auto ck = load_checkpoint(dir);
  ASSERT_TRUE(ck.is_ok()) << ck.error_message();
  auto index = nlohmann::json::parse(read_bytes(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(ck->weights.size(), index["weight_map"].size());
  EXPECT_EQ(ck->weights.total_bytes(), index["metadata"]["total_size"].get<size_t>());
  for (const auto& [tensor, shard] : index["weight_map"].items())
    EXPECT_EQ(ck->weights.find(tensor)->file, dir + "/" + shard.get<std::string>()) << tensor;
}

// Re-writing a reference file's tensors in its data order must give back the same bytes.
void expect_rewrite_identical(const std::string& path) {
  SCOPED_TRACE(path);
  const std::string original = read_bytes(path);
  auto header = parse_safetensors(reinterpret_cast<const uint8_t*>(original.data()), original.size(), path);
  ASSERT_TRUE(header.is_ok()) << header.error_message();
  std::vector<TensorToWrite> tensors;
  for (const auto& t : header->tensors)
    tensors.push_back({t.name, t.dtype, t.shape, original.data() + header->data_offset + t.begin});
  TempDir dir;
  ASSERT_TRUE(write_safetensors(dir.file("rewrite.safetensors"), tensors, header->metadata));
  const std::string rewritten = read_bytes(dir.file("rewrite.safetensors"));
  EXPECT_EQ(rewritten.size(), original.size());
  EXPECT_TRUE(rewritten == original)
      << "first difference at byte "
      << std::mismatch(rewritten.begin(), rewritten.end(), original.begin(), original.end()).first -
             rewritten.begin();
}

TEST(Interop, WriterMatchesReferenceWriterBytes) {
  SKIP_WITHOUT_GOLDENS("tiny-llama");
  SKIP_WITHOUT_GOLDENS("tiny-qwen3");
  expect_rewrite_identical(kModels + "/tiny-llama/model.safetensors");
  expect_rewrite_identical(kModels + "/tiny-qwen2/model.safetensors");
  for (int k = 1; k <= 8; ++k)
    expect_rewrite_identical(kModels + "/tiny-qwen3/model-0000" + std::to_string(k) +
                             "-of-00008.safetensors");
}

}  // namespace
}  // namespace helium
