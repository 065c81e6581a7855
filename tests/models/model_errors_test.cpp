// Bad checkpoints get an error that names the cause (DESIGN.md invariant 5): unknown architecture,
// missing tensor, wrong shape, inconsistent head counts, unsupported options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "core/softmax_terms.h"
#include "golden_fixture.h"
#include "kv/kv_cache.h"
#include "models/model.h"

namespace helium {
namespace {

namespace fs = std::filesystem;

class ModelErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("helium_model_errors_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* f : {"config.json", "model.safetensors"})
      fs::copy_file(testing::golden_dir("tiny-llama") + "/" + f, dir_ / f);
    config_ = nlohmann::json::parse(std::ifstream(dir_ / "config.json"));
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_config(const nlohmann::json& c) { std::ofstream(dir_ / "config.json") << c.dump(1); }

  // Rewrites model.safetensors through `edit` on the tensor list.
  template <class Edit>
  void rewrite_weights(Edit edit) {
    WeightMap map;
    ASSERT_TRUE(load_safetensors((dir_ / "model.safetensors").string(), map).is_ok());
    std::vector<TensorToWrite> tensors;
    for (const auto& name : map.names()) {
      const WeightInfo* w = map.find(name);
      tensors.push_back({name, w->dtype, w->shape, w->data});
    }
    edit(tensors);
    std::string tmp = (dir_ / "model.new").string();
    ASSERT_TRUE(write_safetensors(tmp, tensors).is_ok());
    fs::rename(tmp, dir_ / "model.safetensors");
  }

  std::string load_error() {
    auto ckpt = load_checkpoint(dir_.string());
    if (!ckpt.is_ok()) return ckpt.error_message();
    CpuBackend backend(1);
    auto model = load_model(ckpt.value(), backend, ModelOptions{});
    return model.is_ok() ? "" : model.error_message();
  }

  fs::path dir_;
  nlohmann::json config_;
};

TEST_F(ModelErrors, GoodCheckpointLoads) { EXPECT_EQ(load_error(), ""); }

// HELIUM_STEP_UPLOAD (diagnostic): 'one' and 'regions' load; anything else is refused by name.
TEST_F(ModelErrors, StepUploadSwitchTakesOneOrRegions) {
  const char* saved = std::getenv("HELIUM_STEP_UPLOAD");
  const std::string kept = saved != nullptr ? saved : "";
  setenv("HELIUM_STEP_UPLOAD", "regions", 1);
  EXPECT_EQ(load_error(), "");
  setenv("HELIUM_STEP_UPLOAD", "one", 1);
  EXPECT_EQ(load_error(), "");
  setenv("HELIUM_STEP_UPLOAD", "both", 1);
  const std::string e = load_error();
  EXPECT_NE(e.find("HELIUM_STEP_UPLOAD must be 'one' or 'regions', not 'both'"), std::string::npos) << e;
  if (saved != nullptr) setenv("HELIUM_STEP_UPLOAD", kept.c_str(), 1);
  else unsetenv("HELIUM_STEP_UPLOAD");
}

TEST_F(ModelErrors, UnknownModelTypeIsNamed) {
  config_["model_type"] = "gpt_neox";
  write_config(config_);
  std::string e = load_error();
  EXPECT_NE(e.find("unknown model_type 'gpt_neox'"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen3"), std::string::npos) << e;  // lists what is supported
}

TEST_F(ModelErrors, MissingTensorIsNamed) {
  rewrite_weights([](std::vector<TensorToWrite>& t) {
    std::erase_if(t, [](const TensorToWrite& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  std::string e = load_error();
  EXPECT_NE(e.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << e;
}

TEST_F(ModelErrors, WrongShapeIsNamed) {
  config_["intermediate_size"] = 200;  // the checkpoint has 192
  write_config(config_);
  std::string e = load_error();
  EXPECT_NE(e.find("mlp.gate_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("200"), std::string::npos) << e;
}

TEST_F(ModelErrors, HeadCountsMustDivide) {
  config_["num_key_value_heads"] = 4;  // 6 heads
  write_config(config_);
  std::string e = load_error();
  EXPECT_NE(e.find("num_key_value_heads"), std::string::npos) << e;
}

TEST_F(ModelErrors, MissingSizeKeyIsNamed) {
  config_.erase("hidden_size");
  write_config(config_);
  std::string e = load_error();
  EXPECT_NE(e.find("hidden_size"), std::string::npos) << e;
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
}

TEST_F(ModelErrors, UnsupportedRopeTypeIsNamed) {
  config_["rope_parameters"]["rope_type"] = "longrope";
  write_config(config_);
  std::string e = load_error();
  EXPECT_NE(e.find("longrope"), std::string::npos) << e;
}

TEST_F(ModelErrors, UnsupportedActivationIsNamed) {
  config_["hidden_act"] = "gelu";
  write_config(config_);
  std::string e = load_error();
  EXPECT_NE(e.find("gelu"), std::string::npos) << e;
}

}  // namespace
}  // namespace helium

namespace helium {
namespace {

// Bad batches get an error naming the problem and leave the model usable.
TEST(ModelForward, BadBatchesAreRefused) {
  auto ckpt = load_checkpoint(testing::golden_dir("tiny-llama"));
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.error_message();
  CpuBackend backend(1);
  ModelOptions mo;
  mo.max_rows = 128;
  mo.max_context = 256;
  auto model = load_model(ckpt.value(), backend, mo);
  ASSERT_TRUE(model.is_ok()) << model.error_message();
  auto kv = KvCache::create(backend, model.value()->kv_spec(), 256, DType::F32);
  ASSERT_TRUE(kv.is_ok());
  const int64_t vocab = model.value()->info().vocab_size;

  int32_t seq = kv.value()->new_sequence();
  Batch many;  // 65 rows asking for logits: more than any forward may
  for (int i = 0; i < 65; ++i) many.add(1, i, seq, true);
  ASSERT_TRUE(kv.value()->plan(many).is_ok());
  std::vector<float> logits(65 * vocab);
  Status st = model.value()->forward(many, kv.value()->layers(), logits);
  EXPECT_NE(st.message().find("ask for logits"), std::string::npos) << st.message();

  Batch unplanned;
  unplanned.add(1, 0, seq, true);
  std::vector<float> one(vocab);
  EXPECT_NE(model.value()->forward(unplanned, kv.value()->layers(), one).message().find("KV layout"), std::string::npos);

  int32_t s2 = kv.value()->new_sequence();
  Batch bad_token;
  bad_token.add(static_cast<int32_t>(vocab), 0, s2, true);
  ASSERT_TRUE(kv.value()->plan(bad_token).is_ok());
  EXPECT_NE(model.value()->forward(bad_token, kv.value()->layers(), one).message().find("outside the vocabulary"),
            std::string::npos);

  // Output buffers of the wrong size are refused by name.
  kv.value()->free_sequence(s2);
  int32_t s3 = kv.value()->new_sequence();
  Batch good;
  good.add(1, 0, s3, true);
  ASSERT_TRUE(kv.value()->plan(good).is_ok());
  std::vector<float> short_logits(vocab - 1);
  EXPECT_NE(model.value()->forward(good, kv.value()->layers(), short_logits).message().find("logits buffer has the wrong size"),
            std::string::npos);
  std::vector<int32_t> two_ids(2);
  EXPECT_NE(model.value()
                ->forward(good, kv.value()->layers(), ForwardOutputs{{}, two_ids})
                .message()
                .find("argmax buffer has the wrong size"),
            std::string::npos);

  // Sampling candidates: buffers of the wrong size, settings outside the device path, and argmax ids asked
  // for together with them are refused by name.
  float temperature = 0.7f;
  int32_t top_k = 20, count = 0, valid = 0;
  std::vector<float> cand_x(kMaxCandidates);
  std::vector<int32_t> cand_ids(kMaxCandidates);
  auto candidates = [&](std::span<float> x) {
    return CandidateOutputs{{&temperature, 1}, {&top_k, 1}, x, cand_ids, {&count, 1}, {&valid, 1}};
  };
  auto message = [&](const ForwardOutputs& out) { return model.value()->forward(good, kv.value()->layers(), out).message(); };
  EXPECT_NE(message(ForwardOutputs{{}, {}, candidates(std::span<float>(cand_x).first(10))}).find("candidate buffers"),
            std::string::npos);
  top_k = Backend::kMaxSelectTopK + 1;
  EXPECT_NE(message(ForwardOutputs{{}, {}, candidates(cand_x)}).find("top_k in 1.."), std::string::npos);
  top_k = 20;
  temperature = 0.0f;
  EXPECT_NE(message(ForwardOutputs{{}, {}, candidates(cand_x)}).find("temperature > 0"), std::string::npos);
  temperature = 0.7f;
  int32_t id = -1;
  EXPECT_NE(message(ForwardOutputs{{}, std::span<int32_t>(&id, 1), candidates(cand_x)}).find("either argmax ids or"),
            std::string::npos);
  double totals[2] = {0, 0};
  CandidateOutputs two_totals = candidates(cand_x);
  two_totals.total = std::span<double>(totals, 2);
  EXPECT_NE(message(ForwardOutputs{{}, {}, two_totals}).find("candidate buffers"), std::string::npos);
  // And valid ones give the best top_k of the logits, the first of them the greedy token, and the row's
  // softmax total; the logits stay where they are until the next forward (last_logits), which refuses a row
  // the forward did not give and a buffer of the wrong size.
  CandidateOutputs with_total = candidates(cand_x);
  with_total.total = std::span<double>(totals, 1);
  ASSERT_TRUE(model.value()->forward(good, kv.value()->layers(), ForwardOutputs{{}, {}, with_total}).is_ok());
  EXPECT_EQ(count, top_k);
  EXPECT_EQ(valid, vocab);
  std::vector<float> kept(vocab);
  ASSERT_TRUE(model.value()->last_logits(0, kept).is_ok());
  EXPECT_EQ(totals[0], softmax_total(kept, temperature));
  EXPECT_NE(model.value()->last_logits(1, kept).message().find("logit row 1 of a forward that gave 1"), std::string::npos);
  EXPECT_NE(model.value()->last_logits(0, short_logits).message().find("logits buffer has the wrong size"),
            std::string::npos);

  // The model still works afterwards, and its argmax is the greedy token of its logits.
  int32_t greedy = -1;
  ASSERT_TRUE(model.value()->forward(good, kv.value()->layers(), ForwardOutputs{one, std::span<int32_t>(&greedy, 1)}).is_ok());
  EXPECT_EQ(greedy, std::max_element(one.begin(), one.end()) - one.begin());
  EXPECT_EQ(cand_ids[0], greedy);
  EXPECT_EQ(kept, one);  // the candidates' forward and this one ran the same row
}

}  // namespace
}  // namespace helium
