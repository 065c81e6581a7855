// `helium pull`, `helium models` and `helium run -m org/name` end to end: the real binary, its environment
// (HF_ENDPOINT, HF_HUB_CACHE, HF_HUB_OFFLINE, HELIUM_CATALOG) pointed at the fake Hub serving
// tests/data/models/tiny-qwen3.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/mapped_file.h"
#include "fake_hub.h"

namespace helium {
namespace {
namespace fs = std::filesystem;
using testing::FakeHub;
using testing::FakeRepo;

const std::string kTinyDir = std::string(HELIUM_SOURCE_DIR) + "/tests/data/models/tiny-qwen3";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Output {
  int code = 0;
  std::string out, err;
};

class HubCli : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"http_proxy", "https_proxy", "all_proxy", "HTTPS_PROXY", "ALL_PROXY", "no_proxy",
                          "NO_PROXY", "HF_TOKEN", "HF_HUB_OFFLINE", "HF_HOME", "HELIUM_CATALOG"})
      ::unsetenv(v);
    dir = ::testing::TempDir() + "hub_cli_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + std::to_string(::getpid());
    fs::remove_all(dir);
    fs::create_directories(dir);
    tiny.id = "test/tiny-qwen3";
    tiny.commit = testing::fake_commit(3);
    for (const auto& entry : fs::directory_iterator(kTinyDir)) {
      const std::string name = entry.path().filename().string();
      tiny.files.push_back(
          {name, read_all(entry.path().string()), entry.path().extension() == ".safetensors"});
    }
    hub.add_repo(tiny);
  }
  void TearDown() override { fs::remove_all(dir); }

  // Runs the binary with the fake Hub's environment plus `env` (e.g. "HF_HUB_OFFLINE=1").
  Output helium(const std::string& args, const std::string& env = "") {
    static int calls = 0;
    const std::string err_path = dir + "/stderr_" + std::to_string(calls++) + ".txt";
    const std::string cmd = "env HF_ENDPOINT=" + hub.endpoint() + " HF_HUB_CACHE=" + dir + "/cache " + env +
                            " " + HELIUM_BINARY + " " + args + " 2>" + err_path;
    Output o;
    FILE* p = ::popen(cmd.c_str(), "r");
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
    const int status = ::pclose(p);
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.err = read_all(err_path);
    return o;
  }

  // The ids after "generated ids:" in --show-ids output.
  static std::string generated_ids(const std::string& err) {
    const auto at = err.find("generated ids:");
    return at == std::string::npos ? "" : err.substr(at, err.find('\n', at) - at);
  }

  FakeHub hub;
  FakeRepo tiny;
  std::string dir;
};

TEST_F(HubCli, PullThenRunFromTheCacheOffline) {
  Output pulled = helium("pull test/tiny-qwen3");
  ASSERT_EQ(pulled.code, 0) << pulled.err;
  EXPECT_NE(pulled.err.find("downloading 14 of 14 files"), std::string::npos) << pulled.err;
  EXPECT_EQ(pulled.err.find('\r'), std::string::npos) << "plain progress lines when stderr is not a terminal";
  const std::string snapshot = dir + "/cache/models--test--tiny-qwen3/snapshots/" + tiny.commit;
  EXPECT_NE(pulled.out.find(snapshot), std::string::npos) << pulled.out;

  const int before = hub.requests();
  const std::string run = "run -p 'The quick brown fox' -n 8 --temp 0 --ignore-eos --show-ids -t 2 -m ";
  Output cached = helium(run + "test/tiny-qwen3", "HF_HUB_OFFLINE=1");
  ASSERT_EQ(cached.code, 0) << cached.err;
  EXPECT_EQ(hub.requests(), before);  // offline: not one request
  Output local = helium(run + kTinyDir);
  ASSERT_EQ(local.code, 0) << local.err;
  EXPECT_FALSE(generated_ids(local.err).empty()) << local.err;
  EXPECT_EQ(generated_ids(cached.err), generated_ids(local.err));
  EXPECT_EQ(cached.out, local.out);

  Output again = helium("pull test/tiny-qwen3");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("all 14 files are in the cache"), std::string::npos) << again.err;
  for (const auto& f : tiny.files) EXPECT_EQ(hub.content_requests(f.path), 1) << f.path;
}

TEST_F(HubCli, RunPullsOnFirstUseAfterSayingHowMuch) {
  Output o = helium("run -m test/tiny-qwen3@main -p hello -n 2 -t 2");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("test/tiny-qwen3@main is not in the cache: downloading 14 of 14 files"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("memory plan"), std::string::npos) << o.err;
}

TEST_F(HubCli, ShortNamesComeFromTheCatalog) {
  std::string catalog = read_all(std::string(HELIUM_SOURCE_DIR) + "/catalog/models.json");
  // The real catalog plus an entry for the fake Hub's repository.
  const std::string entry = R"("tiny": {
      "description": "tiny-qwen3 on the fake Hub", "repo": "test/tiny-qwen3", "revision": ")" +
                            tiny.commit + R"(",
      "files": ["*.json", "model-*.safetensors"], "family": "qwen3", "context": 4096, "quantization": "bf16",
      "supported_since": "0.1.0", "parameters": {"total": 199296},
      "shape": {"layers": 3, "hidden": 64, "vocab": 512, "tied_embeddings": true,
                "attention": {"layers": 3, "heads": 4, "kv_heads": 2, "head_dim": 32},
                "ffn": {"layers": 3, "intermediate": 160}}},
    )";
  catalog.insert(catalog.find("\"helium-code-12m\""), entry);
  const std::string path = dir + "/catalog.json";
  std::ofstream(path) << catalog;
  const std::string env = "HELIUM_CATALOG=" + path;

  Output before = helium("models", env);
  ASSERT_EQ(before.code, 0) << before.err;
  const auto line = [](const std::string& text, const std::string& name) {
    const auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? std::string() : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line(before.out, "tiny").find(" no "), std::string::npos) << before.out;

  Output pulled = helium("pull tiny", env);
  ASSERT_EQ(pulled.code, 0) << pulled.err;
  EXPECT_NE(pulled.err.find("downloading 13 of 13 files"), std::string::npos) << pulled.err;

  Output after = helium("models", env);
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_NE(line(after.out, "tiny").find(" yes "), std::string::npos) << after.out;

  Output refused = helium("pull 35b", env);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("not implemented yet"), std::string::npos) << refused.err;
}

TEST_F(HubCli, IncludePatternsChooseTheFiles) {
  Output o = helium("pull --include '*.json' --include 'model-*.safetensors' test/tiny-qwen3 -j 2");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("downloading 13 of 13 files"), std::string::npos) << o.err;
  EXPECT_EQ(hub.content_requests("goldens.safetensors"), 0);
  EXPECT_EQ(hub.content_requests("model-00008-of-00008.safetensors"), 1);
}

TEST_F(HubCli, OfflinePullFailsWithoutARequest) {
  Output o = helium("pull --offline test/tiny-qwen3");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("offline"), std::string::npos) << o.err;
  Output env = helium("pull test/tiny-qwen3", "HF_HUB_OFFLINE=1");
  EXPECT_EQ(env.code, 1);
  EXPECT_EQ(hub.requests(), 0);
}

TEST_F(HubCli, ACorruptDownloadIsReportedAndNothingIsLinked) {
  hub.serve_wrong_bytes("model-00004-of-00008.safetensors");
  Output o = helium("pull test/tiny-qwen3");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("model-00004-of-00008.safetensors"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("corrupt download refused"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(dir + "/cache/models--test--tiny-qwen3/snapshots/" + tiny.commit +
                          "/model-00004-of-00008.safetensors"));
}

}  // namespace
}  // namespace helium
