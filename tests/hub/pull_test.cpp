// Pulls against the fake Hub: full download into the cache layout, parallel transfers, resumption after a
// cut connection and of a partial file left behind, corrupt bytes refused, offline mode, cache reuse (ours
// and a cache laid out by huggingface_hub), the token, clear HTTP errors, and libcurl's proxy variables.
#include "hub/pull.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fake_hub.h"

namespace helium {
namespace {
namespace fs = std::filesystem;
using testing::FakeFile;
using testing::FakeHub;
using testing::FakeRepo;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class Pull : public ::testing::Test {
 protected:
  void SetUp() override {
    // The machine's proxy settings must not reroute requests to the local fake Hub.
    for (const char* v :
         {"http_proxy", "https_proxy", "all_proxy", "HTTPS_PROXY", "ALL_PROXY", "no_proxy", "NO_PROXY"})
      ::unsetenv(v);
    cache_dir = ::testing::TempDir() + "hub_pull_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                std::to_string(::getpid());
    fs::remove_all(cache_dir);
    fs::create_directories(cache_dir);
    settings.endpoint = hub.endpoint();
    settings.cache_dir = cache_dir;
    transfer.retry_delay_ms = 10;
    transfer.max_attempts = 4;
    repo.id = "org/model";
    repo.commit = testing::fake_commit(1);
    repo.files = {
        {"config.json", R"({"model_type": "qwen3"})", false},
        {"tokenizer.json", R"({"version": "1.0"})", false},
        {"model.safetensors.index.json", R"({"weight_map": {}})", false},
        {"model-00001-of-00002.safetensors", testing::random_bytes(300000, 1), true},
        {"model-00002-of-00002.safetensors", testing::random_bytes(250001, 2), true},
        {"README.md", "# not fetched", false},
    };
  }
  void TearDown() override { fs::remove_all(cache_dir); }

  const FakeFile& file(const std::string& path) const {
    for (const auto& f : repo.files)
      if (f.path == path) return f;
    throw std::runtime_error("no file " + path);
  }
  std::string etag(const FakeFile& f) const {
    return f.lfs ? testing::sha256_hex(f.content) : testing::git_blob_id(f.content);
  }

  Result<PullResult> pull(const std::string& revision = "main") {
    HubClient client(settings, transfer);
    HubCache cache(cache_dir);
    PullOptions options;
    options.patterns = {"*.json", "*.safetensors"};
    HELIUM_ASSIGN_OR_RETURN(PullPlan plan, plan_pull(client, cache, RepoRef{repo.id, revision}, options));
    last_plan = plan;
    return execute_pull(client, cache, plan, options);
  }

  FakeHub hub;
  FakeRepo repo;
  std::string cache_dir;
  HubSettings settings;
  TransferOptions transfer;
  PullPlan last_plan;
};

TEST_F(Pull, FullDownloadLandsInTheHuggingFaceLayout) {
  hub.set_chunk_delay_ms(3);
  hub.add_repo(repo);
  auto r = pull();
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(r->commit, repo.commit);
  EXPECT_EQ(r->files, 5);
  EXPECT_EQ(r->files_downloaded, 5);
  int64_t bytes = 0;
  for (const auto& f : repo.files)
    bytes += f.path == "README.md" ? 0 : static_cast<int64_t>(f.content.size());
  EXPECT_EQ(r->bytes_downloaded, bytes);
  HubCache cache(cache_dir);
  const std::string snap = cache.snapshot_dir(repo.id, repo.commit);
  EXPECT_EQ(r->snapshot_dir, snap);
  for (const auto& f : repo.files) {
    const std::string link = snap + "/" + f.path;
    if (f.path == "README.md") {
      EXPECT_FALSE(fs::exists(link));
      continue;
    }
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    EXPECT_EQ(fs::read_symlink(link).string(), "../../blobs/" + etag(f));
    EXPECT_EQ(read_all(link), f.content) << f.path;
    EXPECT_TRUE(fs::is_regular_file(cache.blob_path(repo.id, etag(f))));
    EXPECT_FALSE(fs::exists(cache.incomplete_path(repo.id, etag(f))));
  }
  EXPECT_EQ(read_all(cache.repo_dir(repo.id) + "/refs/main"), repo.commit);
  EXPECT_GE(hub.max_parallel_transfers(), 2);  // several files at once
  // LFS files came through the redirect to the CDN; regular ones straight from resolve.
  EXPECT_EQ(hub.content_requests("model-00001-of-00002.safetensors"), 1);
  EXPECT_EQ(hub.api_requests(), 1);
}

TEST_F(Pull, ResumesAfterTheConnectionIsCutMidFile) {
  hub.add_repo(repo);
  const std::string shard = "model-00001-of-00002.safetensors";
  hub.cut_after(shard, 100000);
  auto r = pull();
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  const auto ranges = hub.ranges(shard);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=100000-");
  EXPECT_EQ(hub.bytes_served(shard), 300000);  // not one byte sent twice
  EXPECT_EQ(read_all(r->snapshot_dir + "/" + shard), file(shard).content);
}

TEST_F(Pull, ContinuesAPartialFileLeftBehindByAnInterruptedRun) {
  hub.add_repo(repo);
  const std::string shard = "model-00002-of-00002.safetensors";
  HubCache cache(cache_dir);
  const std::string incomplete = cache.incomplete_path(repo.id, etag(file(shard)));
  fs::create_directories(fs::path(incomplete).parent_path());
  std::ofstream(incomplete, std::ios::binary) << file(shard).content.substr(0, 123457);
  auto r = pull();
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(last_plan.bytes_partial, 123457);
  EXPECT_EQ(hub.ranges(shard), std::vector<std::string>{"bytes=123457-"});
  EXPECT_EQ(hub.bytes_served(shard), 250001 - 123457);
  EXPECT_EQ(read_all(r->snapshot_dir + "/" + shard), file(shard).content);
  EXPECT_FALSE(fs::exists(incomplete));
}

TEST_F(Pull, CorruptBytesAreRefusedAndDeleted) {
  hub.add_repo(repo);
  const std::string shard = "model-00002-of-00002.safetensors";
  hub.serve_wrong_bytes(shard);
  auto r = pull();
  ASSERT_FALSE(r.is_ok());
  const std::string& err = r.error_message();
  std::string wrong = file(shard).content;
  for (auto& c : wrong) c = static_cast<char>(c ^ 0x5a);
  EXPECT_NE(err.find(shard), std::string::npos) << err;
  EXPECT_NE(err.find(etag(file(shard))), std::string::npos) << err;           // the expected hash
  EXPECT_NE(err.find(testing::sha256_hex(wrong)), std::string::npos) << err;  // the hash received
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
  HubCache cache(cache_dir);
  EXPECT_FALSE(fs::exists(cache.blob_path(repo.id, etag(file(shard)))));
  EXPECT_FALSE(fs::exists(cache.incomplete_path(repo.id, etag(file(shard)))));
  // The other files are in place; no ref names an incomplete snapshot.
  EXPECT_EQ(read_all(cache.snapshot_dir(repo.id, repo.commit) + "/model-00001-of-00002.safetensors"),
            file("model-00001-of-00002.safetensors").content);
  EXPECT_FALSE(fs::exists(cache.repo_dir(repo.id) + "/refs/main"));
}

TEST_F(Pull, CorruptRegularFileFailsItsGitBlobId) {
  hub.add_repo(repo);
  hub.serve_wrong_bytes("config.json");
  auto r = pull();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error_message().find("config.json"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("git blob SHA-1"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find(etag(file("config.json"))), std::string::npos) << r.error_message();
}

// The headers of the Hub's first answer (read before the CDN redirect is followed) must agree with the
// listing: a file that changed in between is refused rather than stored under the wrong name.
TEST_F(Pull, HeadersThatContradictTheListingAreRefused) {
  hub.add_repo(repo);
  hub.announce_other_etag("model-00001-of-00002.safetensors");
  hub.announce_other_etag("config.json");
  auto r = pull();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error_message().find("2 of 5 files"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("differs from the listing's"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("model-00001-of-00002.safetensors"), std::string::npos)
      << r.error_message();
  EXPECT_EQ(hub.content_requests("model-00001-of-00002.safetensors"), 0);  // the redirect was not followed
}

TEST_F(Pull, ASecondPullDownloadsNothing) {
  hub.add_repo(repo);
  ASSERT_TRUE(pull().is_ok());
  const int before = hub.requests();
  auto again = pull();
  ASSERT_TRUE(again.is_ok()) << again.error_message();
  EXPECT_EQ(again->files_reused, 5);
  EXPECT_EQ(again->files_downloaded, 0);
  EXPECT_EQ(again->bytes_downloaded, 0);
  EXPECT_EQ(hub.requests(), before + 1);  // the listing only
  for (const auto& f : repo.files) EXPECT_LE(hub.content_requests(f.path), 1) << f.path;
}

// A cache written by huggingface_hub: blobs named by hash, relative links, refs/main. Reused as it is.
TEST_F(Pull, ReusesACacheLaidOutByHuggingFaceHub) {
  hub.add_repo(repo);
  HubCache cache(cache_dir);
  const std::string root = cache.repo_dir(repo.id);
  for (const auto& f : repo.files) {
    if (f.path == "README.md") continue;
    fs::create_directories(root + "/blobs");
    std::ofstream(root + "/blobs/" + etag(f), std::ios::binary) << f.content;
    fs::create_directories(root + "/snapshots/" + repo.commit);
    fs::create_symlink("../../blobs/" + etag(f), root + "/snapshots/" + repo.commit + "/" + f.path);
  }
  fs::create_directories(root + "/refs");
  std::ofstream(root + "/refs/main", std::ios::binary) << repo.commit;
  auto r = pull();
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(r->files_reused, 5);
  for (const auto& f : repo.files) EXPECT_EQ(hub.content_requests(f.path), 0) << f.path;
  EXPECT_EQ(cache.find_snapshot(repo.id, "main").value(), cache.snapshot_dir(repo.id, repo.commit));
}

TEST_F(Pull, ADamagedCachedBlobIsFetchedAgain) {
  hub.add_repo(repo);
  ASSERT_TRUE(pull().is_ok());
  const std::string shard = "model-00001-of-00002.safetensors";
  HubCache cache(cache_dir);
  std::ofstream(cache.blob_path(repo.id, etag(file(shard))), std::ios::binary) << std::string(300000, 'x');
  auto r = pull();
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  EXPECT_EQ(r->files_downloaded, 1);
  EXPECT_EQ(hub.content_requests(shard), 2);
  EXPECT_EQ(read_all(r->snapshot_dir + "/" + shard), file(shard).content);
}

TEST_F(Pull, OfflineModeSendsNoRequest) {
  hub.add_repo(repo);
  settings.offline = true;
  auto r = pull();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error_message().find("offline"), std::string::npos) << r.error_message();
  EXPECT_EQ(hub.requests(), 0);
  // Even a direct download call refuses.
  HubClient client(settings, transfer);
  RepoFile f{"config.json", 23, testing::git_blob_id(file("config.json").content), ""};
  EXPECT_FALSE(client.download(repo.id, repo.commit, f, cache_dir + "/x.incomplete", nullptr).is_ok());
  EXPECT_EQ(hub.requests(), 0);
}

TEST_F(Pull, TheTokenGoesAsABearerHeader) {
  repo.token = "hf_secret";
  hub.add_repo(repo);
  auto anonymous = pull();
  ASSERT_FALSE(anonymous.is_ok());
  EXPECT_NE(anonymous.error_message().find("HTTP 401"), std::string::npos) << anonymous.error_message();
  EXPECT_NE(anonymous.error_message().find("HF_TOKEN"), std::string::npos) << anonymous.error_message();
  EXPECT_NE(anonymous.error_message().find("org/model"), std::string::npos) << anonymous.error_message();
  settings.token = "hf_secret";
  auto r = pull();
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  const auto auths = hub.authorizations();
  ASSERT_GT(auths.size(), 2u);
  for (size_t i = 1; i < auths.size(); ++i) EXPECT_EQ(auths[i], "Bearer hf_secret") << i;
}

// The Hub redirects LFS files to a CDN on another host: the token must not follow the redirect. Here the
// endpoint is named "localhost" and the redirect goes to "127.0.0.1", another host name to libcurl.
TEST_F(Pull, TheTokenDoesNotFollowARedirectToAnotherHost) {
  hub.add_repo(repo);
  settings.endpoint = "http://localhost:" + std::to_string(hub.port());
  settings.token = "hf_secret";
  auto r = pull();
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  const auto auths = hub.authorizations();
  const auto paths = hub.paths();
  ASSERT_EQ(auths.size(), paths.size());
  int cdn = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].rfind("/cdn/", 0) == 0) {
      ++cdn;
      EXPECT_EQ(auths[i], "") << paths[i];
    } else {
      EXPECT_EQ(auths[i], "Bearer hf_secret") << paths[i];
    }
  }
  EXPECT_EQ(cdn, 2);  // the two LFS shards
}

TEST_F(Pull, MissingRepositoryRevisionAndFileAreReportedClearly) {
  hub.add_repo(repo);
  HubClient client(settings, transfer);
  auto no_repo = client.repo_info("org/absent", "main");
  ASSERT_FALSE(no_repo.is_ok());
  EXPECT_NE(no_repo.error_message().find("HTTP 404"), std::string::npos) << no_repo.error_message();
  EXPECT_NE(no_repo.error_message().find("no such repository"), std::string::npos) << no_repo.error_message();
  EXPECT_NE(no_repo.error_message().find("org/absent"), std::string::npos) << no_repo.error_message();
  auto no_rev = client.repo_info("org/model", "v9");
  ASSERT_FALSE(no_rev.is_ok());
  EXPECT_NE(no_rev.error_message().find("no such revision"), std::string::npos) << no_rev.error_message();
  RepoFile ghost{"ghost.json", 3, std::string(40, 'a'), ""};
  auto no_file = client.download("org/model", repo.commit, ghost, cache_dir + "/ghost.incomplete", nullptr);
  ASSERT_FALSE(no_file.is_ok());
  EXPECT_NE(no_file.error_message().find("no such file"), std::string::npos) << no_file.error_message();
  EXPECT_NE(no_file.error_message().find("ghost.json"), std::string::npos) << no_file.error_message();
}

TEST_F(Pull, APinnedCommitIsRequestedByHash) {
  hub.add_repo(repo);
  auto r = pull(repo.commit);
  ASSERT_TRUE(r.is_ok()) << r.error_message();
  HubCache cache(cache_dir);
  EXPECT_FALSE(fs::exists(cache.repo_dir(repo.id) + "/refs"));  // a commit needs no ref
  EXPECT_EQ(cache.find_snapshot(repo.id, repo.commit).value(), r->snapshot_dir);
}

TEST_F(Pull, PatternsSelectFiles) {
  EXPECT_TRUE(matches_any("model-00001-of-00002.safetensors", {"*.safetensors"}));
  EXPECT_TRUE(
      matches_any("sub/dir/model.safetensors", {"*.safetensors"}));  // '*' crosses '/' as in huggingface_hub
  EXPECT_TRUE(matches_any("tokenizer_config.json", {"tokenizer*"}));
  EXPECT_FALSE(matches_any("README.md", {"*.json", "*.safetensors"}));
  EXPECT_TRUE(matches_any("anything", {}));
  hub.add_repo(repo);
  HubClient client(settings, transfer);
  HubCache cache(cache_dir);
  PullOptions options;
  options.patterns = {"*.gguf"};
  auto plan = plan_pull(client, cache, RepoRef{repo.id, "main"}, options);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.error_message().find("no file matches"), std::string::npos) << plan.error_message();
}

// libcurl reads the proxy from the environment: with http_proxy set, the request goes to the proxy as an
// absolute URL; a host listed in no_proxy bypasses it.
TEST_F(Pull, ProxyVariablesFromTheEnvironmentAreHonoured) {
  settings.endpoint = "http://hub.invalid";
  transfer.max_attempts = 1;
  transfer.connect_timeout_s = 5;
  ::setenv("http_proxy", hub.endpoint().c_str(), 1);
  HubClient client(settings, transfer);
  auto through_proxy = client.repo_info("org/model", "main");
  EXPECT_FALSE(through_proxy.is_ok());  // the fake proxy answers 404
  const auto seen = hub.other_paths();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "http://hub.invalid/api/models/org/model/revision/main");
  ::setenv("no_proxy", "hub.invalid", 1);
  auto direct = client.repo_info("org/model", "main");
  EXPECT_FALSE(direct.is_ok());             // hub.invalid does not resolve
  EXPECT_EQ(hub.other_paths().size(), 1u);  // and the proxy saw nothing more
  ::unsetenv("http_proxy");
  ::unsetenv("no_proxy");
}

}  // namespace
}  // namespace helium
