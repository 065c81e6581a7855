// tests/tokenizer/errors_test.cpp — bad tokenizer files give clear errors, never a crash or a tokenizer
// that silently does something else.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/tokenizer.h"

namespace helium {
namespace {

// A minimal valid tokenizer.json with `model`, `pre_tokenizer` and so on replaced as given.
std::string tokenizer_json(const std::string& model, const std::string& extra = "") {
  return R"({"version": "1.0", "added_tokens": [], "normalizer": null, "post_processor": null,
             "decoder": null, "model": )" +
         model + extra + "}";
}

const std::string kModel = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

// The error message of a load that must fail.
std::string load_error(const std::string& json, const std::string& config = "") {
  const auto result = Tokenizer::from_json(json, config, "tokenizer.json");
  EXPECT_FALSE(result.is_ok()) << "loaded: " << json;
  return result.is_ok() ? std::string() : result.error_message();
}

TEST(TokenizerErrors, MinimalFileLoads) {
  const auto result = Tokenizer::from_json(tokenizer_json(kModel), "", "tokenizer.json");
  ASSERT_TRUE(result.is_ok()) << result.error_message();
  EXPECT_EQ((*result)->encode("ab"), (std::vector<int32_t>{2}));
}

TEST(TokenizerErrors, MalformedJson) {
  const std::string message = load_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, )");
  EXPECT_NE(message.find("tokenizer.json: invalid JSON"), std::string::npos) << message;
  EXPECT_NE(load_error("").find("invalid JSON"), std::string::npos);
  EXPECT_NE(load_error("[1, 2]").find("top level must be an object"), std::string::npos);
}

TEST(TokenizerErrors, MissingModel) {
  EXPECT_EQ(load_error(R"({"version": "1.0", "added_tokens": []})"), "tokenizer.json: 'model' is missing");
  EXPECT_EQ(load_error(R"({"model": null})"), "tokenizer.json: 'model' is missing");
}

TEST(TokenizerErrors, UnsupportedModelTypes) {
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"})")),
            "tokenizer.json: unsupported model type 'WordPiece' (only BPE is supported)");
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "Unigram", "vocab": [["a", 0.0]], "unk_id": 0})")),
            "tokenizer.json: unsupported model type 'Unigram' (only BPE is supported)");
  EXPECT_EQ(load_error(tokenizer_json(R"({"vocab": {"a": 0}})")),
            "tokenizer.json: unsupported model type '' (only BPE is supported)");
}

TEST(TokenizerErrors, MissingOrBadVocab) {
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "BPE", "merges": []})")),
            "tokenizer.json: model.vocab is missing");
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "BPE", "vocab": ["a"], "merges": []})")),
            "tokenizer.json: model.vocab must be an object of token -> id");
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "BPE", "vocab": {"a": -1}, "merges": []})")),
            "tokenizer.json: model.vocab['a'] must be a non-negative 32-bit id");
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []})")),
            "tokenizer.json: model.vocab: id 0 is given to both 'a' and 'b'");
}

TEST(TokenizerErrors, MergesMustNameVocabularyTokens) {
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]})")),
            "tokenizer.json: model.merges[0]: 'ab' is not in the vocabulary");
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "c"]]})")),
            "tokenizer.json: model.merges[0]: 'c' is not in the vocabulary");
  EXPECT_NE(load_error(tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]})"))
                .find("model.merges[0] 'a' is not two tokens"),
            std::string::npos);
}

TEST(TokenizerErrors, BpeOptionsThatCannotBeHonoured) {
  EXPECT_EQ(load_error(tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1})")),
            "tokenizer.json: model.dropout > 0 is not supported");
  EXPECT_EQ(
      load_error(tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"})")),
      "tokenizer.json: model.unk_token '<unk>' is not in the vocabulary");
}

TEST(TokenizerErrors, UnsupportedComponentTypes) {
  EXPECT_EQ(load_error(tokenizer_json(kModel, R"(, "pre_tokenizer": {"type": "X"})")),
            "tokenizer.json: unsupported pre_tokenizer type 'X'");
  EXPECT_EQ(load_error(tokenizer_json(kModel, R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                                                  {"type": "ByteLevel"}, {"type": "UnicodeScripts"}]})")),
            "tokenizer.json: unsupported pre_tokenizer type 'UnicodeScripts'");
  EXPECT_EQ(load_error(R"({"model": )" + kModel + R"(, "normalizer": {"type": "Precompiled"}})"),
            "tokenizer.json: unsupported normalizer type 'Precompiled'");
  EXPECT_EQ(load_error(R"({"model": )" + kModel + R"(, "decoder": {"type": "CTC"}})"),
            "tokenizer.json: unsupported decoder type 'CTC'");
  EXPECT_EQ(load_error(R"({"model": )" + kModel + R"(, "post_processor": {"type": "Whatever"}})"),
            "tokenizer.json: unsupported post_processor type 'Whatever'");
  EXPECT_EQ(load_error(tokenizer_json(kModel, R"(, "pre_tokenizer": {"pretokenizers": []})")),
            "tokenizer.json: pre_tokenizer.type is missing");
}

TEST(TokenizerErrors, BadComponentFields) {
  EXPECT_EQ(
      load_error(tokenizer_json(kModel, R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
                                                  "behavior": "Sideways"})")),
      "tokenizer.json: pre_tokenizer.behavior 'Sideways' is not a split behavior");
  EXPECT_EQ(load_error(tokenizer_json(kModel, R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Rx": "a"},
                                                  "behavior": "Isolated"})")),
            "tokenizer.json: pre_tokenizer.pattern must be an object with \"String\" or \"Regex\"");
  EXPECT_EQ(
      load_error(tokenizer_json(kModel, R"(, "pre_tokenizer": {"type": "ByteLevel", "use_regex": "yes"})")),
      "tokenizer.json: pre_tokenizer.use_regex must be true or false");
  EXPECT_EQ(load_error(R"({"model": )" + kModel + R"(, "added_tokens": [{"content": "<s>"}]})"),
            "tokenizer.json: added_tokens[0].id must be a non-negative 32-bit integer");
}

// A regex whose Oniguruma meaning PCRE2 would silently change is refused.
TEST(TokenizerErrors, RegexesThatWouldBeMistranslated) {
  const std::string message = load_error(tokenizer_json(
      kModel,
      R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[a-z&&[^aeiou]]+"}, "behavior": "Isolated"})"));
  EXPECT_NE(message.find("pre_tokenizer.pattern: regex '[a-z&&[^aeiou]]+'"), std::string::npos) << message;
  EXPECT_NE(message.find("not supported"), std::string::npos) << message;
  const std::string unbalanced = load_error(tokenizer_json(
      kModel, R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"})"));
  EXPECT_NE(unbalanced.find("PCRE2 cannot compile it"), std::string::npos) << unbalanced;
}

TEST(TokenizerErrors, BadTokenizerConfig) {
  const std::string json = tokenizer_json(kModel);
  EXPECT_NE(load_error(json, "{not json").find("tokenizer.json (tokenizer_config.json): invalid JSON"),
            std::string::npos);
  EXPECT_EQ(load_error(json, R"({"bos_token": "<s>"})"),
            "tokenizer.json (tokenizer_config.json): bos_token '<s>' is not a token of the tokenizer");
  EXPECT_EQ(
      load_error(json, R"({"eos_token": 7})"),
      "tokenizer.json (tokenizer_config.json): eos_token must be a string or an object with \"content\"");
  EXPECT_EQ(load_error(json, R"({"chat_template": 3})"),
            "tokenizer.json (tokenizer_config.json): chat_template must be a string or a list of templates");
}

TEST(TokenizerErrors, FromDirNamesTheMissingFile) {
  const auto result = Tokenizer::from_dir("/nonexistent/helium/model");
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.error_message().find("/nonexistent/helium/model/tokenizer.json"), std::string::npos)
      << result.error_message();
}

}  // namespace
}  // namespace helium
