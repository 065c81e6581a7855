// Tests of config.json (nested text_config) and generation_config.json parsing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/checkpoint.h"
#include "loader_fixtures.h"

namespace helium {
namespace {

using testing_loader::expect_mentions;

TEST(TextConfig, FlatConfigIsItsOwnTextConfig) {
  auto c = parse_text_config(R"({"model_type": "qwen3", "hidden_size": 64, "tie_word_embeddings": true})",
                             "config.json");
  ASSERT_TRUE(c.is_ok()) << c.error_message();
  EXPECT_EQ((*c)["model_type"], "qwen3");
  EXPECT_EQ((*c)["hidden_size"], 64);
}

TEST(TextConfig, NestedTextConfigInheritsWrapperKeysItLacks) {
  // Shaped like a Qwen3.5 wrapper: tie_word_embeddings and dtype only at the top level.
  auto c = parse_text_config(R"({
      "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
      "tie_word_embeddings": false, "torch_dtype": "bfloat16", "dtype": "bfloat16",
      "image_token_id": 248056, "vision_config": {"depth": 2},
      "quantization_config": {"quant_method": "fp8"},
      "text_config": {"model_type": "qwen3_5_text", "hidden_size": 32, "num_hidden_layers": 4}})",
                             "config.json");
  ASSERT_TRUE(c.is_ok()) << c.error_message();
  EXPECT_EQ((*c)["model_type"], "qwen3_5_text");
  EXPECT_EQ((*c)["hidden_size"], 32);
  EXPECT_EQ((*c)["tie_word_embeddings"], false);
  EXPECT_EQ((*c)["torch_dtype"], "bfloat16");
  EXPECT_EQ((*c)["dtype"], "bfloat16");
  EXPECT_EQ((*c)["quantization_config"]["quant_method"], "fp8");
  // Keys that describe the wrapper stay out.
  EXPECT_FALSE(c->contains("vision_config"));
  EXPECT_FALSE(c->contains("image_token_id"));
  EXPECT_FALSE(c->contains("architectures"));
  EXPECT_FALSE(c->contains("text_config"));
}

TEST(TextConfig, TextConfigOwnValuesWin) {
  auto c =
      parse_text_config(R"({"model_type": "gemma3", "tie_word_embeddings": false, "torch_dtype": "float32",
                                  "text_config": {"model_type": "gemma3_text", "tie_word_embeddings": true,
                                                  "torch_dtype": "bfloat16"}})",
                        "config.json");
  ASSERT_TRUE(c.is_ok()) << c.error_message();
  EXPECT_EQ((*c)["tie_word_embeddings"], true);
  EXPECT_EQ((*c)["torch_dtype"], "bfloat16");
}

TEST(TextConfig, ModelTypeFallsBackToTopLevel) {
  auto c =
      parse_text_config(R"({"model_type": "llava_text", "text_config": {"hidden_size": 16}})", "config.json");
  ASSERT_TRUE(c.is_ok()) << c.error_message();
  EXPECT_EQ((*c)["model_type"], "llava_text");
  auto null_nested = parse_text_config(R"({"model_type": "llama", "text_config": null})", "config.json");
  ASSERT_TRUE(null_nested.is_ok()) << null_nested.error_message();
  EXPECT_EQ((*null_nested)["model_type"], "llama");
}

TEST(TextConfig, Errors) {
  struct Case {
    std::string text;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {R"({"hidden_size": 8})", {"dir/config.json: no \"model_type\""}},
      {R"({"text_config": {"hidden_size": 8}})", {"dir/config.json: no \"model_type\"", "text_config"}},
      {R"({"model_type": 5})", {"dir/config.json: key \"model_type\" must be a non-empty string", "number"}},
      {R"({"model_type": ""})", {"dir/config.json: key \"model_type\" must be a non-empty string"}},
      {R"({"model_type": "x", "text_config": [1]})",
       {"dir/config.json: key \"text_config\" must be an object"}},
      {R"([1, 2])", {"dir/config.json: must be a JSON object", "array"}},
      {"{\"model_type\": \"llama\",\n  \"hidden_size\": 8,,}",
       {"dir/config.json: invalid JSON", "line 2, column"}},
      {"", {"dir/config.json: invalid JSON"}},
      {std::string("{\"model_type\": \"llama\"}\0{", 25),
       {"dir/config.json: invalid JSON: NUL byte at offset 23"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parse_text_config(c.text, "dir/config.json");
    ASSERT_FALSE(r.is_ok());
    for (const auto& part : c.expected) expect_mentions(r.error_message(), {part});
  }
}

TEST(GenerationConfigParse, EosAsNumberOrList) {
  auto one = parse_generation_config(R"({"eos_token_id": 151645})", "g.json");
  ASSERT_TRUE(one.is_ok()) << one.error_message();
  EXPECT_EQ(one->eos_token_ids, std::vector<int32_t>{151645});
  auto many =
      parse_generation_config(R"({"eos_token_id": [151645, 151643], "bos_token_id": 151643})", "g.json");
  ASSERT_TRUE(many.is_ok()) << many.error_message();
  EXPECT_EQ(many->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(many->bos_token_id, 151643);
  EXPECT_FALSE(many->pad_token_id.has_value());
}

TEST(GenerationConfigParse, SamplingSettings) {
  auto g = parse_generation_config(R"({"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0,
                                       "repetition_penalty": 1.05, "do_sample": true, "pad_token_id": 0,
                                       "transformers_version": "4.51.0"})",
                                   "g.json");
  ASSERT_TRUE(g.is_ok()) << g.error_message();
  EXPECT_FLOAT_EQ(*g->temperature, 0.7f);
  EXPECT_FLOAT_EQ(*g->top_p, 0.8f);
  EXPECT_EQ(*g->top_k, 20);
  EXPECT_FLOAT_EQ(*g->min_p, 0.0f);
  EXPECT_FLOAT_EQ(*g->repetition_penalty, 1.05f);
  EXPECT_EQ(*g->do_sample, true);
  EXPECT_EQ(*g->pad_token_id, 0);
  EXPECT_TRUE(g->eos_token_ids.empty());
}

TEST(GenerationConfigParse, AbsentAndNullKeysStayUnset) {
  auto g =
      parse_generation_config(R"({"temperature": null, "eos_token_id": null, "pad_token_id": -1})", "g.json");
  ASSERT_TRUE(g.is_ok()) << g.error_message();
  EXPECT_FALSE(g->temperature.has_value());
  EXPECT_TRUE(g->eos_token_ids.empty());
  EXPECT_FALSE(g->pad_token_id.has_value()) << "-1 is how old configs say 'no pad token'";
  EXPECT_FALSE(g->top_k.has_value());
  EXPECT_FALSE(g->do_sample.has_value());
}

TEST(GenerationConfigParse, WrongTypesNameTheKey) {
  struct Case {
    std::string text, key;
  };
  const std::vector<Case> cases = {
      {R"({"eos_token_id": "2"})", "eos_token_id"},
      {R"({"eos_token_id": [2, "3"]})", "eos_token_id"},
      {R"({"eos_token_id": [2, -3]})", "eos_token_id"},
      {R"({"eos_token_id": 1.5})", "eos_token_id"},
      {R"({"eos_token_id": 4294967296})", "eos_token_id"},
      {R"({"bos_token_id": true})", "bos_token_id"},
      {R"({"pad_token_id": 99999999999})", "pad_token_id"},
      {R"({"temperature": "hot"})", "temperature"},
      {R"({"top_p": [0.9]})", "top_p"},
      {R"({"min_p": {}})", "min_p"},
      {R"({"repetition_penalty": "1.1"})", "repetition_penalty"},
      {R"({"top_k": 1.5})", "top_k"},
      {R"({"top_k": "20"})", "top_k"},
      {R"({"do_sample": "yes"})", "do_sample"},
      {R"({"do_sample": 1})", "do_sample"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto g = parse_generation_config(c.text, "ckpt/generation_config.json");
    ASSERT_FALSE(g.is_ok());
    expect_mentions(g.error_message(), {"ckpt/generation_config.json: key \"" + c.key + "\" must be"});
  }
  auto not_object = parse_generation_config("[]", "ckpt/generation_config.json");
  ASSERT_FALSE(not_object.is_ok());
  expect_mentions(not_object.error_message(), {"ckpt/generation_config.json: must be a JSON object"});
  auto bad_json = parse_generation_config("{\"top_k\": 5", "ckpt/generation_config.json");
  ASSERT_FALSE(bad_json.is_ok());
  expect_mentions(bad_json.error_message(), {"ckpt/generation_config.json: invalid JSON", "line 1"});
}

}  // namespace
}  // namespace helium
