// The Hugging Face cache layout: names, refs, snapshot symlinks (exactly the relative links huggingface_hub
// writes), offline lookup, and the completeness check of a model directory.
#include "hub/cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace helium {
namespace {
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "hub_cache_" + name + "_" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(HubCache, RepoIdsRevisionsAndPaths) {
  EXPECT_EQ(repo_folder_name("Qwen/Qwen3-8B"), "models--Qwen--Qwen3-8B");
  EXPECT_TRUE(is_repo_id("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"));
  EXPECT_TRUE(is_repo_id("inclusionAI/LLaDA2.0-mini"));
  for (const char* bad :
       {"Qwen3-8B", "/abs/path", "a/b/c", "a//b", "-a/b", "a/b.", "a--b/c", "a/..", "a b/c", ""})
    EXPECT_FALSE(is_repo_id(bad)) << bad;

  auto ref = parse_repo_ref("Qwen/Qwen3-8B");
  ASSERT_TRUE(ref.is_ok());
  EXPECT_EQ(ref->repo, "Qwen/Qwen3-8B");
  EXPECT_EQ(ref->revision, "main");
  ref = parse_repo_ref("Qwen/Qwen3-8B@refs/pr/12");
  ASSERT_TRUE(ref.is_ok());
  EXPECT_EQ(ref->revision, "refs/pr/12");
  EXPECT_FALSE(parse_repo_ref("Qwen/Qwen3-8B@").is_ok());
  EXPECT_FALSE(parse_repo_ref("Qwen/Qwen3-8B@../../etc").is_ok());
  auto bad = parse_repo_ref("not a repo");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error_message().find("not a repo"), std::string::npos);

  EXPECT_TRUE(is_commit_hash("b968826d9c46dd6066d109eabc6255188de91218"));
  EXPECT_FALSE(is_commit_hash("main"));
  EXPECT_FALSE(is_commit_hash("B968826D9C46DD6066D109EABC6255188DE91218"));
  EXPECT_TRUE(is_safe_repo_path("model-00001-of-00004.safetensors"));
  EXPECT_TRUE(is_safe_repo_path("original/params.json"));
  for (const char* bad_path : {"", "/etc/passwd", "../x", "a/../b", "a//b", "a/./b", "a\\b", "a/"})
    EXPECT_FALSE(is_safe_repo_path(bad_path)) << bad_path;
}

TEST(HubCache, PathsFollowTheHuggingFaceLayout) {
  HubCache cache("/c");
  const std::string sha(64, 'a');
  EXPECT_EQ(cache.repo_dir("Qwen/Qwen3-8B"), "/c/models--Qwen--Qwen3-8B");
  EXPECT_EQ(cache.blob_path("Qwen/Qwen3-8B", sha), "/c/models--Qwen--Qwen3-8B/blobs/" + sha);
  EXPECT_EQ(cache.incomplete_path("Qwen/Qwen3-8B", sha),
            "/c/models--Qwen--Qwen3-8B/blobs/" + sha + ".incomplete");
  EXPECT_EQ(cache.snapshot_dir("Qwen/Qwen3-8B", "abc"), "/c/models--Qwen--Qwen3-8B/snapshots/abc");
  EXPECT_EQ(cache.lock_path("Qwen/Qwen3-8B", sha), "/c/.locks/models--Qwen--Qwen3-8B/" + sha + ".lock");
}

TEST(HubCache, SnapshotLinksAreRelativeLikeHuggingFaceHub) {
  const std::string root = temp_dir("links");
  HubCache cache(root);
  const std::string repo = "org/model", commit(40, 'c'), etag(40, 'e');
  write(cache.blob_path(repo, etag), "{}");
  ASSERT_TRUE(cache.link_into_snapshot(repo, commit, "config.json", etag).is_ok());
  ASSERT_TRUE(cache.link_into_snapshot(repo, commit, "sub/dir/file.json", etag).is_ok());
  const std::string snap = cache.snapshot_dir(repo, commit);
  EXPECT_EQ(fs::read_symlink(snap + "/config.json").string(), "../../blobs/" + etag);
  EXPECT_EQ(fs::read_symlink(snap + "/sub/dir/file.json").string(), "../../../../blobs/" + etag);
  std::ifstream in(snap + "/sub/dir/file.json");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "{}");  // the link resolves
  // Linking again is a no-op; a different target replaces the link.
  ASSERT_TRUE(cache.link_into_snapshot(repo, commit, "config.json", etag).is_ok());
  const std::string other(40, 'f');
  ASSERT_TRUE(cache.link_into_snapshot(repo, commit, "config.json", other).is_ok());
  EXPECT_EQ(fs::read_symlink(snap + "/config.json").string(), "../../blobs/" + other);
  EXPECT_FALSE(cache.link_into_snapshot(repo, commit, "../escape.json", etag).is_ok());
  fs::remove_all(root);
}

TEST(HubCache, RefsAndOfflineLookup) {
  const std::string root = temp_dir("refs");
  HubCache cache(root);
  const std::string repo = "org/model", commit = "0123456789abcdef0123456789abcdef01234567";
  EXPECT_FALSE(cache.read_ref(repo, "main").has_value());
  auto missing = cache.find_snapshot(repo, "main");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.error_message().find("refs/main"), std::string::npos) << missing.error_message();

  ASSERT_TRUE(cache.write_ref(repo, "main", commit).is_ok());
  std::ifstream f(cache.repo_dir(repo) + "/refs/main", std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, commit);  // no newline, as huggingface_hub writes it
  EXPECT_EQ(cache.read_ref(repo, "main").value(), commit);
  ASSERT_TRUE(cache.write_ref(repo, "refs/pr/3", commit).is_ok());
  EXPECT_EQ(cache.read_ref(repo, "refs/pr/3").value(), commit);

  EXPECT_FALSE(cache.find_snapshot(repo, "main").is_ok());  // the ref exists, the snapshot does not
  fs::create_directories(cache.snapshot_dir(repo, commit));
  EXPECT_EQ(cache.find_snapshot(repo, "main").value(), cache.snapshot_dir(repo, commit));
  EXPECT_EQ(cache.find_snapshot(repo, commit).value(), cache.snapshot_dir(repo, commit));
  fs::remove_all(root);
}

TEST(HubCache, ModelDirectoryCompleteness) {
  const std::string dir = temp_dir("complete");
  EXPECT_EQ(check_model_dir(dir).missing, "config.json");
  write(dir + "/config.json", "{}");
  EXPECT_FALSE(check_model_dir(dir).complete);
  write(
      dir + "/model.safetensors.index.json",
      R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  write(dir + "/model-00001-of-00002.safetensors", "x");
  EXPECT_EQ(check_model_dir(dir).missing, "model-00002-of-00002.safetensors");
  // A dangling link (its blob is gone) counts as missing.
  fs::create_symlink("../blobs/gone", dir + "/model-00002-of-00002.safetensors");
  EXPECT_EQ(check_model_dir(dir).missing, "model-00002-of-00002.safetensors");
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  write(dir + "/model-00002-of-00002.safetensors", "y");
  EXPECT_EQ(check_model_dir(dir).missing, "tokenizer.json");
  write(dir + "/tokenizer.json", "{}");
  EXPECT_TRUE(check_model_dir(dir).complete);
  EXPECT_TRUE(check_model_dir(std::string(HELIUM_SOURCE_DIR) + "/models/helium-code-12m").complete);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace helium
