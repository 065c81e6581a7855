// tests/tokenizer/components_test.cpp — the tokenizer.json components one at a time, on the cases the
// real files of the reference comparison do not reach (Metaspace, Digits, Punctuation, split behaviors,
// subword prefixes, unknown tokens...). Expected values come from the reference Rust library's own tests
// where it has one for the case, otherwise from its source.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace helium::tokenizer_json {
namespace {

using Json = nlohmann::json;
using Strings = std::vector<std::string>;
using Ids = std::vector<int32_t>;

// --- unicode ------------------------------------------------------------------------------------------

TEST(TokenizerUnicode, InvalidUtf8BecomesReplacementCharactersByMaximalSubpart) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(unicode::to_valid_utf8("plain \xE4\xB8\xAD"), "plain \xE4\xB8\xAD");
  EXPECT_EQ(unicode::to_valid_utf8("\xE4\xB8"), fffd);  // truncated: one
  EXPECT_EQ(unicode::to_valid_utf8("\xE4\xB8x"), fffd + "x");
  EXPECT_EQ(unicode::to_valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);             // surrogate: three
  EXPECT_EQ(unicode::to_valid_utf8("\xF0\x80\x80\xAF"), fffd + fffd + fffd + fffd);  // overlong
  EXPECT_EQ(unicode::to_valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // above U+10FFFF
  EXPECT_EQ(unicode::to_valid_utf8("\xC3\x28"), fffd + "(");
  EXPECT_EQ(unicode::to_valid_utf8("\xF0\x9F\x98"), fffd);
  EXPECT_EQ(unicode::to_valid_utf8("\x80\xBF"), fffd + fffd);
  EXPECT_EQ(unicode::to_valid_utf8("\xFF\xFE"), fffd + fffd);
  EXPECT_EQ(unicode::to_valid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(unicode::to_valid_utf8("\xEF\xBB\xBFx"), "\xEF\xBB\xBFx");  // a BOM is text
}

TEST(TokenizerUnicode, WhiteSpaceIsTheUnicodeProperty) {
  for (char32_t cp : {U' ', U'\t', U'\n', U'\r', char32_t{0x0B}, char32_t{0x0C}, char32_t{0x85},
                      char32_t{0xA0}, char32_t{0x1680}, char32_t{0x2000}, char32_t{0x200A}, char32_t{0x2028},
                      char32_t{0x2029}, char32_t{0x202F}, char32_t{0x205F}, char32_t{0x3000}}) {
    EXPECT_TRUE(unicode::is_white_space(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {U'a', char32_t{0x180E}, char32_t{0x200B}, char32_t{0xFEFF}, char32_t{0x1C}}) {
    EXPECT_FALSE(unicode::is_white_space(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
}

TEST(TokenizerUnicode, LowercaseIsTheFullMapping) {
  EXPECT_EQ(unicode::to_lowercase("HeLLo"), "hello");
  EXPECT_EQ(unicode::to_lowercase("\xC4\xB0"), "i\xCC\x87");  // İ -> i + combining dot
  // Final sigma: "ΟΔΥΣΣΕΥΣ" -> "οδυσσευς".
  EXPECT_EQ(unicode::to_lowercase("\xCE\x9F\xCE\x94\xCE\xA5\xCE\xA3\xCE\xA3\xCE\x95\xCE\xA5\xCE\xA3"),
            "\xCE\xBF\xCE\xB4\xCF\x85\xCF\x83\xCF\x83\xCE\xB5\xCF\x85\xCF\x82");
  EXPECT_EQ(unicode::to_lowercase("\xCE\xA3"), "\xCF\x83");                  // a lone Σ is not final
  EXPECT_EQ(unicode::to_lowercase("A\xCE\xA3."), "a\xCF\x82.");              // final before punctuation
  EXPECT_EQ(unicode::to_lowercase("\xC3\x89\xC3\x80"), "\xC3\xA9\xC3\xA0");  // ÉÀ
}

TEST(TokenizerUnicode, NormalizationForms) {
  EXPECT_EQ(unicode::normalize("e\xCC\x81", unicode::NormalForm::kNfc), "\xC3\xA9");
  EXPECT_EQ(unicode::normalize("\xC3\xA9", unicode::NormalForm::kNfd), "e\xCC\x81");
  EXPECT_EQ(unicode::normalize("\xEF\xAC\x81", unicode::NormalForm::kNfkd), "fi");              // ﬁ
  EXPECT_EQ(unicode::normalize("\xEF\xBC\xA1\xE2\x91\xA0", unicode::NormalForm::kNfkc), "A1");  // Ａ①
  EXPECT_EQ(unicode::normalize("\xE2\x84\xAB", unicode::NormalForm::kNfc), "\xC3\x85");  // Å sign -> Å
  // Marks are reordered by combining class before composing: dot below (220) before dot above (230).
  EXPECT_EQ(unicode::normalize("q\xCC\x87\xCC\xA3", unicode::NormalForm::kNfc), "q\xCC\xA3\xCC\x87");
  EXPECT_EQ(unicode::normalize(std::string("a\0e\xCC\x81", 5), unicode::NormalForm::kNfc),
            std::string("a\0\xC3\xA9", 4));
}

// --- regex --------------------------------------------------------------------------------------------

std::vector<std::string> matches(const std::string& pattern, const std::string& text) {
  const auto regex = Regex::from_oniguruma(pattern);
  EXPECT_TRUE(regex.is_ok()) << regex.error_message();
  if (!regex.is_ok()) return {};
  std::vector<std::string> out;
  for (const auto& [begin, end] : regex->find_all(text)) out.push_back(text.substr(begin, end - begin));
  return out;
}

TEST(TokenizerRegex, ShorthandsHaveOnigurumaMeaning) {
  // \s is White_Space: U+0085 yes, U+180E (which PCRE2's own \s accepts) no.
  EXPECT_EQ(matches(R"(\s+)",
                    "a\xC2\x85 b\xE1\xA0\x8E"
                    "c"),
            (Strings{"\xC2\x85 "}));
  EXPECT_EQ(matches(R"([^\s]+)", "a\xE1\xA0\x8E b"), (Strings{"a\xE1\xA0\x8E", "b"}));
  // \w: letters, marks, decimal digits, connector punctuation.
  EXPECT_EQ(matches(R"(\w+)", "e\xCC\x81t\xC3\xA9_9 x-y"), (Strings{"e\xCC\x81t\xC3\xA9_9", "x", "y"}));
  // \h is a hexadecimal digit in Oniguruma.
  EXPECT_EQ(matches(R"(\h+)", "0x1fZ \t"), (Strings{"0", "1f"}));
  EXPECT_EQ(matches(R"(\bab\b)", "ab cab ab"), (Strings{"ab", "ab"}));
  EXPECT_EQ(matches(R"(\u0041+)", "xAAy"), (Strings{"AA"}));
  EXPECT_EQ(matches(R"(a{,2})", "aaa"), (Strings{"aa", "a"}));
  EXPECT_EQ(matches(R"([[:alpha:]]+)", "ab1\xC3\xA9"), (Strings{"ab", "\xC3\xA9"}));
}

TEST(TokenizerRegex, CaseInsensitiveGroupsFoldUnicodeLikeOniguruma) {
  const std::string qwen_words =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(matches(qwen_words, "DON'T we'Ve"), (Strings{"DON", "'T", " we", "'Ve"}));
  // U+017F (ſ) case-folds to s, so "'ſ" is a contraction for the reference's Oniguruma (and here); the
  // JavaScript port folds ASCII only and would keep "'ſt" whole.
  EXPECT_EQ(matches(qwen_words, "'\xC5\xBFt"), (Strings{"'\xC5\xBF", "t"}));
}

TEST(TokenizerRegex, LookaheadAndWhitespaceRuns) {
  const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(matches(gpt2, "a   b  "), (Strings{"a", "  ", " b", "  "}));
  EXPECT_EQ(matches(gpt2, "Hello world123 !!"), (Strings{"Hello", " world", "123", " !!"}));
}

TEST(TokenizerRegex, EmptyMatchesFollowTheOnigCrateIteration) {
  EXPECT_EQ(matches("a*", "baa"), (Strings{"", "aa"}));
  EXPECT_EQ(matches("x?", ""), (Strings{""}));
  // ^ and $ are line anchors, and ^ matches after a final newline too.
  EXPECT_EQ(matches("^", "a\n").size(), 2u);
  EXPECT_EQ(matches("^b$", "a\nb\nc"), (Strings{"b"}));
  EXPECT_EQ(matches(".+", "ab\rc\nd"), (Strings{"ab\rc", "d"}));
}

TEST(TokenizerRegex, ConstructsPcre2WouldMisreadAreRefused) {
  for (const char* pattern : {"[a-z&&[^aeiou]]", "[[abc]]", "a{2}+", R"([\W])", "[[:graph:]]", "[abc"}) {
    EXPECT_FALSE(translate_oniguruma_pattern(pattern).is_ok()) << pattern;
  }
}

TEST(TokenizerRegex, LiteralPatterns) {
  const Regex literal = Regex::literal("a.b");
  const auto found = literal.find_all("a.ba.baxb");
  EXPECT_EQ(found, (std::vector<std::pair<size_t, size_t>>{{0, 3}, {3, 6}}));
}

// --- normalizers --------------------------------------------------------------------------------------

std::string normalize(const std::string& json, const std::string& text) {
  const auto normalizer = parse_normalizer(Json::parse(json), "normalizer");
  EXPECT_TRUE(normalizer.is_ok()) << normalizer.error_message();
  return normalizer.is_ok() ? (*normalizer)->normalize(text) : std::string();
}

TEST(TokenizerNormalizers, Each) {
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "HeLLo \xC3\x89"), "hello \xC3\xA9");
  EXPECT_EQ(
      normalize(R"({"type": "Strip", "strip_left": true, "strip_right": true})", " \t\xE3\x80\x80 a b \n"),
      "a b");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": false, "strip_right": true})", "  a  "), "  a");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "\u2581"})", "hey"), "\xE2\x96\x81hey");
  EXPECT_EQ(normalize(R"({"type": "Prepend", "prepend": "\u2581"})", ""), "");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})", "a b  c"),
            "a\xE2\x96\x81"
            "b\xE2\x96\x81\xE2\x96\x81"
            "c");
  EXPECT_EQ(normalize(R"({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "})", "a \t\n b"),
            "a b");
  EXPECT_EQ(normalize(R"({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}]})",
                      "\xC3\xA9t\xC3\xA9"),
            "ete");
  EXPECT_EQ(normalize(R"({"type": "NFKC"})", "\xEF\xBD\x86\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C"), "full");
  EXPECT_EQ(normalize(R"({"type": "ByteLevel"})", "a b\n"),
            "a\xC4\xA0"
            "b\xC4\x8A");
}

// --- pre-tokenizers -----------------------------------------------------------------------------------

std::vector<PreToken> pre_tokenize(const std::string& json, std::vector<PreToken> pieces) {
  const auto pre_tokenizer = parse_pre_tokenizer(Json::parse(json), "pre_tokenizer");
  EXPECT_TRUE(pre_tokenizer.is_ok()) << pre_tokenizer.error_message();
  if (pre_tokenizer.is_ok()) (*pre_tokenizer)->pre_tokenize(pieces);
  return pieces;
}

Strings pre_tokenize(const std::string& json, const std::string& text) {
  Strings out;
  for (const PreToken& piece : pre_tokenize(json, std::vector<PreToken>{{text, true}}))
    out.push_back(piece.text);
  return out;
}

TEST(TokenizerPreTokenizers, SplitBehaviors) {
  const std::string text = "How are you doing?";
  auto split = [&](const char* behavior) {
    return pre_tokenize(
        std::string(R"({"type": "Split", "pattern": {"String": " "}, "invert": false, "behavior": ")") +
            behavior + "\"}",
        text);
  };
  EXPECT_EQ(split("Removed"), (Strings{"How", "are", "you", "doing?"}));
  EXPECT_EQ(split("Isolated"), (Strings{"How", " ", "are", " ", "you", " ", "doing?"}));
  EXPECT_EQ(split("MergedWithPrevious"), (Strings{"How ", "are ", "you ", "doing?"}));
  EXPECT_EQ(split("MergedWithNext"), (Strings{"How", " are", " you", " doing?"}));
  EXPECT_EQ(split("Contiguous"), (Strings{"How", " ", "are", " ", "you", " ", "doing?"}));
  const std::string spaces = R"({"type": "Split", "pattern": {"String": " "}, "behavior": ")";
  EXPECT_EQ(pre_tokenize(spaces + "Contiguous\"}", "a  b"), (Strings{"a", "  ", "b"}));
  EXPECT_EQ(pre_tokenize(spaces + "Isolated\"}", "a  b"), (Strings{"a", " ", " ", "b"}));
  // invert: the matches are the pieces.
  EXPECT_EQ(pre_tokenize(
                R"({"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Removed", "invert": true})",
                "a12b345"),
            (Strings{"12", "345"}));
}

TEST(TokenizerPreTokenizers, MetaspaceReplacesAndSplits) {
  const std::string always =
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true})";
  EXPECT_EQ(pre_tokenize(always, "Hey friend!"), (Strings{"\xE2\x96\x81Hey",
                                                          "\xE2\x96\x81"
                                                          "friend!"}));
  EXPECT_EQ(pre_tokenize(always, "Hey   friend!"), (Strings{"\xE2\x96\x81Hey", "\xE2\x96\x81", "\xE2\x96\x81",
                                                            "\xE2\x96\x81"
                                                            "friend!"}));
  const std::string never = R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never"})";
  EXPECT_EQ(pre_tokenize(never, "Hey friend"), (Strings{"Hey",
                                                        "\xE2\x96\x81"
                                                        "friend"}));
  // "first": only the piece at the start of the input gets the prefix (the reference's own example, with
  // "<s>" already cut out as an added token).
  const std::string first =
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false})";
  std::vector<PreToken> pieces = pre_tokenize(first, {{"Hey my friend ", true},
                                                      {"how\xE2\x96\x81"
                                                       "are you",
                                                       false}});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].text,
            "\xE2\x96\x81Hey\xE2\x96\x81my\xE2\x96\x81"
            "friend\xE2\x96\x81");
  EXPECT_EQ(pieces[1].text,
            "how\xE2\x96\x81"
            "are\xE2\x96\x81you");
  // Older files: add_prefix_space instead of prepend_scheme.
  EXPECT_EQ(pre_tokenize(R"({"type": "Metaspace", "replacement": "_", "add_prefix_space": true})", "a b"),
            (Strings{"_a", "_b"}));
}

TEST(TokenizerPreTokenizers, ByteLevelWithRegexAndPrefixSpace) {
  EXPECT_EQ(pre_tokenize(R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})",
                         "Hello my friend, how is your day going?"),
            (Strings{"\xC4\xA0Hello", "\xC4\xA0my",
                     "\xC4\xA0"
                     "friend",
                     ",", "\xC4\xA0how", "\xC4\xA0is", "\xC4\xA0your",
                     "\xC4\xA0"
                     "day",
                     "\xC4\xA0going", "?"}));
  EXPECT_EQ(
      pre_tokenize(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})", "a b\xC3\xA9"),
      (Strings{"a\xC4\xA0"
               "b\xC3\x83\xC2\xA9"}));
}

TEST(TokenizerPreTokenizers, CharacterClasses) {
  EXPECT_EQ(pre_tokenize(R"({"type": "Whitespace"})", "Hey man!"), (Strings{"Hey", "man", "!"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Whitespace"})", "How are you doing?"),
            (Strings{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Whitespace"})", "\n"), Strings{});
  EXPECT_EQ(pre_tokenize(R"({"type": "WhitespaceSplit"})", "Hey man!\u3000x"), (Strings{"Hey", "man!", "x"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Punctuation"})", "Hey friend!     How are you?!?"),
            (Strings{"Hey friend", "!", "     How are you", "?", "!", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": false})", "Call 123 please"),
            (Strings{"Call ", "123", " please"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits", "individual_digits": true})", "Call 123 please"),
            (Strings{"Call ", "1", "2", "3", " please"}));
  // Digits uses char::is_numeric: every N* character, not only ASCII.
  EXPECT_EQ(pre_tokenize(R"({"type": "Digits"})",
                         "x\xD9\xA3\xC2\xBD"
                         "y"),
            (Strings{"x", "\xD9\xA3\xC2\xBD", "y"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "CharDelimiterSplit", "delimiter": "-"})", "a-b--c"),
            (Strings{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "BertPreTokenizer"})", "Hey friend!  How?"),
            (Strings{"Hey", "friend", "!", "How", "?"}));
  EXPECT_EQ(pre_tokenize(R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                                   {"type": "Digits", "individual_digits": true}]})",
                         "ab12 3"),
            (Strings{"ab", "1", "2", "3"}));
}

// --- BPE ----------------------------------------------------------------------------------------------

Ids bpe(const std::string& model_json, const std::string& word) {
  const auto model = BpeModel::from_json(Json::parse(model_json));
  EXPECT_TRUE(model.is_ok()) << model.error_message();
  Ids ids;
  if (model.is_ok()) (*model)->tokenize(word, ids);
  return ids;
}

TEST(TokenizerBpe, MergesByRankThenLeftmost) {
  const std::string model = R"({"vocab": {"a": 0, "b": 1, "ab": 2, "ba": 3, "aba": 4},
                                "merges": ["b a", "a b", "ab a"]})";
  // "b a" has the best rank: a(ba) then nothing merges with "ba" on the left.
  EXPECT_EQ(bpe(model, "aba"), (Ids{0, 3}));
  // Equal ranks: the leftmost pair goes first.
  EXPECT_EQ(bpe(R"({"vocab": {"a": 0, "aa": 1}, "merges": ["a a"]})", "aaa"), (Ids{1, 0}));
  EXPECT_EQ(bpe(R"({"vocab": {"a": 0, "aa": 1, "aaaa": 2}, "merges": ["a a", "aa aa"]})", "aaaaa"),
            (Ids{2, 0}));
}

TEST(TokenizerBpe, SubwordPrefixAndWordSuffix) {
  // With "##", the merge of "a" and "##b" is the token "ab".
  EXPECT_EQ(bpe(R"({"vocab": {"a": 0, "##b": 1, "ab": 2, "##c": 3}, "merges": [["a", "##b"]],
                    "continuing_subword_prefix": "##"})",
                "abc"),
            (Ids{2, 3}));
  EXPECT_EQ(bpe(R"({"vocab": {"a": 0, "b</w>": 1, "ab</w>": 2}, "merges": [["a", "b</w>"]],
                    "end_of_word_suffix": "</w>"})",
                "ab"),
            (Ids{2}));
}

TEST(TokenizerBpe, UnknownCharactersAndByteFallback) {
  const std::string bytes = R"({"vocab": {"<0xC3>": 0, "<0xA9>": 1, "a": 2, "<unk>": 3}, "merges": [],
                                "byte_fallback": true, "unk_token": "<unk>"})";
  EXPECT_EQ(bpe(bytes, "a\xC3\xA9"), (Ids{2, 0, 1}));
  EXPECT_EQ(bpe(bytes, "\xE4\xB8\xAD"), (Ids{3}));  // bytes not in the vocabulary: unknown
  const std::string fused =
      R"({"vocab": {"a": 0, "<unk>": 1}, "merges": [], "unk_token": "<unk>", "fuse_unk": true})";
  EXPECT_EQ(bpe(fused, "xya"), (Ids{1, 0}));
  const std::string unfused = R"({"vocab": {"a": 0, "<unk>": 1}, "merges": [], "unk_token": "<unk>"})";
  EXPECT_EQ(bpe(unfused, "xya"), (Ids{1, 1, 0}));
  // Without an unknown token an unknown character is dropped, as in the reference.
  EXPECT_EQ(bpe(R"({"vocab": {"a": 0}, "merges": []})", "xa"), (Ids{0}));
}

TEST(TokenizerBpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  // Merging "abc" from characters gives "a" + "bc"; with ignore_merges the word itself is a token.
  const std::string vocab = R"("vocab": {"a": 0, "b": 1, "c": 2, "bc": 3, "abc": 4}, "merges": ["b c"])";
  EXPECT_EQ(bpe("{" + vocab + "}", "abc"), (Ids{0, 3}));
  EXPECT_EQ(bpe("{" + vocab + R"(, "ignore_merges": true})", "abc"), (Ids{4}));
}

// --- post-processors and decoders ---------------------------------------------------------------------

Ids post_process(const std::string& json, Ids ids) {
  const auto processor = parse_post_processor(Json::parse(json), "post_processor");
  EXPECT_TRUE(processor.is_ok()) << processor.error_message();
  if (processor.is_ok()) (*processor)->add_special_tokens(ids);
  return ids;
}

TEST(TokenizerPostProcessors, Each) {
  const std::string llama3 = R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                "tokens": ["<|begin_of_text|>"]}}}]})";
  EXPECT_EQ(post_process(llama3, {9906, 1917}), (Ids{128000, 9906, 1917}));
  const std::string bos_eos = R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}})";
  EXPECT_EQ(post_process(bos_eos, {}), (Ids{1, 2}));
  EXPECT_EQ(post_process(R"({"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]})", {7}),
            (Ids{101, 7, 102}));
  EXPECT_EQ(post_process(R"({"type": "ByteLevel", "trim_offsets": true})", {5, 6}), (Ids{5, 6}));
}

std::string decode(const std::string& json, Strings tokens) {
  const auto decoder = parse_decoder(Json::parse(json), "decoder");
  EXPECT_TRUE(decoder.is_ok()) << decoder.error_message();
  if (!decoder.is_ok()) return {};
  (*decoder)->decode_chain(tokens);
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

TEST(TokenizerDecoders, Each) {
  // The reference drops every replacement character of the first token, not only a leading one.
  const std::string metaspace =
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"})";
  EXPECT_EQ(decode(metaspace, {"\xE2\x96\x81Hey",
                               "\xE2\x96\x81"
                               "friend!"}),
            "Hey friend!");
  EXPECT_EQ(decode(metaspace, {"\xE2\x96\x81\xE2\x96\x81Hey",
                               "\xE2\x96\x81"
                               "friend"}),
            "Hey friend");
  EXPECT_EQ(decode(R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never"})",
                   {"\xE2\x96\x81Hey",
                    "\xE2\x96\x81"
                    "friend!"}),
            " Hey friend!");
  // Llama 2 / Gemma style: spaces back, bytes back, joined, one leading space stripped.
  const std::string sentencepiece = R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
      {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";
  EXPECT_EQ(decode(sentencepiece, {"\xE2\x96\x81Hi", "<0xE5>", "<0x8F>", "<0xAB>", "\xE2\x96\x81there"}),
            "Hi\xE5\x8F\xAB there");
  EXPECT_EQ(decode(R"({"type": "Strip", "content": "x", "start": 2, "stop": 1})", {"xxxaxx", "ya"}), "xaxya");
  EXPECT_EQ(decode(R"({"type": "BPEDecoder", "suffix": "</w>"})", {"hel", "lo</w>", "wor", "ld</w>"}),
            "hello world");
  // "ä¸Ń" is 中 (E4 B8 AD) in byte-level characters; split over tokens it still comes out whole.
  EXPECT_EQ(decode(R"({"type": "ByteLevel"})", {"Hello", "\xC4\xA0world", "\xC3\xA4\xC2\xB8", "\xC5\x83"}),
            "Hello world\xE4\xB8\xAD");
  // A token with a character outside the byte table (U+00AD) stands for its own UTF-8.
  EXPECT_EQ(decode(R"({"type": "ByteLevel"})", {"a\xC2\xAD", "\xC4\xA0"}), "a\xC2\xAD ");
}

TEST(TokenizerDecoders, ByteFallbackDecodesBrokenRunsByMaximalSubpart) {
  const std::string fallback = R"({"type": "ByteFallback"})";
  EXPECT_EQ(decode(fallback, {"<0x61>"}), "a");
  EXPECT_EQ(decode(fallback, {"<0xE5>", "<0x8f>", "<0xab>"}), "\xE5\x8F\xAB");
  // The Rust library would give one U+FFFD per byte here ("\uFFFD\uFFFDa"); helium decodes the broken run
  // like any invalid UTF-8 (see decoder.cpp for why).
  EXPECT_EQ(decode(fallback, {"<0xE5>", "<0x8f>", "a"}),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(decode(fallback, {"<0xZZ>", "<0x4>"}), "<0xZZ><0x4>");
}

}  // namespace
}  // namespace helium::tokenizer_json
