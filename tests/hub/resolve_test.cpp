// resolve_model: paths, catalog names (local and Hub entries), repo ids with revisions, first-use pulls of a
// real checkpoint (tests/data/models/tiny-qwen3 served by the fake Hub), offline resolution without a
// request, and refusals that come before any download.
#include "hub/resolve.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fake_hub.h"

namespace helium {
namespace {
namespace fs = std::filesystem;
using testing::FakeHub;
using testing::FakeRepo;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A repo with the files of a local checkpoint directory; *.safetensors are LFS files, as on the Hub.
FakeRepo repo_from_dir(const std::string& id, const std::string& dir, int seed) {
  FakeRepo repo;
  repo.id = id;
  repo.commit = testing::fake_commit(seed);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    repo.files.push_back({name, read_all(entry.path().string()), entry.path().extension() == ".safetensors"});
  }
  return repo;
}

const std::string kTinyDir = std::string(HELIUM_SOURCE_DIR) + "/tests/data/models/tiny-qwen3";

class Resolve : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"http_proxy", "https_proxy", "all_proxy", "HTTPS_PROXY", "ALL_PROXY", "no_proxy", "NO_PROXY"})
      ::unsetenv(v);
    cache_dir = ::testing::TempDir() + "hub_resolve_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                std::to_string(::getpid());
    fs::remove_all(cache_dir);
    tiny = repo_from_dir("test/tiny-qwen3", kTinyDir, 7);
    hub.add_repo(tiny);
    auto c = Catalog::parse(R"({
      "catalog_version": 1,
      "models": {
        "tiny": {
          "description": "tiny-qwen3 from the fake Hub",
          "repo": "test/tiny-qwen3", "revision": ")" +
                                tiny.commit + R"(",
          "files": ["*.json", "model-*.safetensors"],
          "family": "qwen3", "context": 4096, "quantization": "bf16", "supported_since": "0.1.0",
          "parameters": {"total": 199296},
          "shape": {"layers": 3, "hidden": 64, "vocab": 512, "tied_embeddings": true,
                    "attention": {"layers": 3, "heads": 4, "kv_heads": 2, "head_dim": 32},
                    "ffn": {"layers": 3, "intermediate": 160}}
        },
        "later": {
          "description": "a family this build lacks",
          "repo": "test/tiny-qwen3", "revision": "main", "files": ["*"],
          "family": "qwen3_5_moe", "context": 4096, "quantization": "bf16", "supported_since": "unsupported",
          "unsupported_reason": "the hybrid family is not implemented yet",
          "parameters": {"total": 199296},
          "shape": {"layers": 3, "hidden": 64, "vocab": 512, "tied_embeddings": true,
                    "attention": {"layers": 3, "heads": 4, "kv_heads": 2, "head_dim": 32},
                    "ffn": {"layers": 3, "intermediate": 160}}
        },
        "newer": {
          "description": "needs a later helium",
          "repo": "test/tiny-qwen3", "revision": "main", "files": ["*"],
          "family": "qwen3", "context": 4096, "quantization": "bf16", "supported_since": "9.0.0",
          "parameters": {"total": 199296},
          "shape": {"layers": 3, "hidden": 64, "vocab": 512, "tied_embeddings": true,
                    "attention": {"layers": 3, "heads": 4, "kv_heads": 2, "head_dim": 32},
                    "ffn": {"layers": 3, "intermediate": 160}}
        },
        "default": {
          "description": "the embedded model", "path": "models/helium-code-12m",
          "family": "qwen3", "context": 2048, "quantization": "bf16", "supported_since": "0.1.0",
          "parameters": {"total": 11703936},
          "shape": {"layers": 6, "hidden": 384, "vocab": 8192, "tied_embeddings": true,
                    "attention": {"layers": 6, "heads": 6, "kv_heads": 2, "head_dim": 64},
                    "ffn": {"layers": 6, "intermediate": 896}}
        }
      }
    })",
                            "resolve-test-catalog");
    ASSERT_TRUE(c.is_ok()) << c.error_message();
    catalog = c.value();
    options.hub.endpoint = hub.endpoint();
    options.hub.cache_dir = cache_dir;
    options.catalog = &catalog;
    options.source_dir = HELIUM_SOURCE_DIR;
    options.helium_version = "0.1.0";
    options.supported_families = {"llama", "qwen2", "qwen3"};
    options.transfer.retry_delay_ms = 10;
    log_path = cache_dir + ".log";
    log = std::fopen(log_path.c_str(), "w+");
    options.log = log;
  }
  void TearDown() override {
    std::fclose(log);
    std::remove(log_path.c_str());
    fs::remove_all(cache_dir);
  }
  std::string log_text() {
    std::fflush(log);
    return read_all(log_path);
  }

  FakeHub hub;
  FakeRepo tiny;
  Catalog catalog;
  ResolveOptions options;
  std::string cache_dir, log_path;
  FILE* log = nullptr;
};

TEST_F(Resolve, ADirectoryIsUsedAsItIs) {
  auto r = resolve_model(kTinyDir, options);
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(r->dir, kTinyDir);
  EXPECT_EQ(r->entry, nullptr);
  EXPECT_EQ(hub.requests(), 0);
}

TEST_F(Resolve, ALocalCatalogEntryIsInTheSourceTree) {
  auto r = resolve_model("default", options);
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(r->dir, std::string(HELIUM_SOURCE_DIR) + "/models/helium-code-12m");
  ASSERT_NE(r->entry, nullptr);
  EXPECT_EQ(hub.requests(), 0);
}

TEST_F(Resolve, AShortNameIsPulledOnFirstUseThenServedFromTheCache) {
  HubCache cache(cache_dir);
  EXPECT_FALSE(entry_status(*catalog.find("tiny"), cache, "").downloaded);
  auto r = resolve_model("tiny", options);
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(r->dir, cache.snapshot_dir("test/tiny-qwen3", tiny.commit));
  EXPECT_EQ(r->commit, tiny.commit);
  EXPECT_GT(r->bytes_downloaded, 400000);
  const std::string text = log_text();
  EXPECT_NE(text.find("helium: tiny (test/tiny-qwen3@" + tiny.commit.substr(0, 7) +
                      ") is not in the cache: "
                      "downloading 13 of 13 files"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << "plain lines when the log is not a terminal";
  EXPECT_EQ(read_all(r->dir + "/model-00003-of-00008.safetensors"),
            read_all(kTinyDir + "/model-00003-of-00008.safetensors"));
  EXPECT_FALSE(fs::exists(r->dir + "/goldens.safetensors"));  // not in the entry's file patterns
  const EntryStatus status = entry_status(*catalog.find("tiny"), cache, "");
  EXPECT_TRUE(status.downloaded);
  EXPECT_EQ(status.dir, r->dir);
  EXPECT_GT(status.bytes_on_disk, 400000);

  const int before = hub.requests();
  auto again = resolve_model("tiny", options);
  ASSERT_TRUE(again.is_ok()) << again.error_message();
  EXPECT_EQ(again->dir, r->dir);
  EXPECT_EQ(again->bytes_downloaded, 0);
  EXPECT_EQ(hub.requests(), before);  // a complete pinned snapshot needs no request at all
}

TEST_F(Resolve, ARepoIdAtABranchIsPulledThenFoundOffline) {
  auto r = resolve_model("test/tiny-qwen3@main", options);
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_TRUE(fs::exists(r->dir + "/goldens.safetensors"));  // default patterns take every *.safetensors
  HubCache cache(cache_dir);
  EXPECT_EQ(cache.read_ref("test/tiny-qwen3", "main").value(), tiny.commit);
  const int before = hub.requests();
  options.hub.offline = true;
  auto offline = resolve_model("test/tiny-qwen3", options);
  ASSERT_TRUE(offline.is_ok()) << offline.error_message();
  EXPECT_EQ(offline->dir, r->dir);
  EXPECT_EQ(hub.requests(), before);
}

TEST_F(Resolve, OfflineWithoutTheFilesFailsClearlyAndSilently) {
  options.hub.offline = true;
  auto r = resolve_model("tiny", options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error_message().find("offline mode"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("test/tiny-qwen3"), std::string::npos) << r.error_message();
  EXPECT_EQ(hub.requests(), 0);
}

TEST_F(Resolve, InfoNeverDownloads) {
  options.allow_download = false;
  auto r = resolve_model("tiny", options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error_message().find("helium pull tiny"), std::string::npos) << r.error_message();
  EXPECT_EQ(hub.requests(), 0);
}

TEST_F(Resolve, UnsupportedEntriesAreRefusedBeforeAnyDownload) {
  auto later = resolve_model("later", options);
  ASSERT_FALSE(later.is_ok());
  EXPECT_NE(later.error_message().find("not supported by helium 0.1.0"), std::string::npos)
      << later.error_message();
  EXPECT_NE(later.error_message().find("hybrid family is not implemented yet"), std::string::npos);
  auto newer = resolve_model("newer", options);
  ASSERT_FALSE(newer.is_ok());
  EXPECT_NE(newer.error_message().find("needs helium 9.0.0"), std::string::npos) << newer.error_message();
  options.helium_version = "9.0.0";
  options.supported_families = {"llama"};
  auto no_family = resolve_model("newer", options);
  ASSERT_FALSE(no_family.is_ok());
  EXPECT_NE(no_family.error_message().find("no 'qwen3' model family"), std::string::npos)
      << no_family.error_message();
  EXPECT_EQ(hub.requests(), 0);
}

TEST_F(Resolve, UnknownNamesListTheCatalog) {
  auto r = resolve_model("nonexistent-model", options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error_message().find("nonexistent-model"), std::string::npos);
  EXPECT_NE(r.error_message().find("tiny, later, newer, default"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("org/name"), std::string::npos);
  EXPECT_EQ(hub.requests(), 0);
  auto missing_repo = resolve_model("test/absent", options);
  ASSERT_FALSE(missing_repo.is_ok());
  EXPECT_NE(missing_repo.error_message().find("HTTP 404"), std::string::npos) << missing_repo.error_message();
}

}  // namespace
}  // namespace helium
