// hub/cache.h — the Hugging Face cache layout, exactly as huggingface_hub writes it, so that a file
// downloaded by either tool is found by the other:
//
//   <cache>/models--<org>--<name>/blobs/<etag>             the bytes, named by their hash: the SHA-256 of an
//                                                           LFS file, the git SHA-1 of a regular one
//   <cache>/models--<org>--<name>/blobs/<etag>.incomplete  a download in progress (resumed with a Range)
//   <cache>/models--<org>--<name>/snapshots/<commit>/<path> a relative symlink to ../../blobs/<etag>
//                                                           (one more ../ per directory level of <path>)
//   <cache>/models--<org>--<name>/refs/<revision>           the commit a branch or tag pointed at, no newline
//   <cache>/.locks/models--<org>--<name>/<etag>.lock        flock()ed while one process writes that blob
//                                                           (huggingface_hub's filelock takes the same lock)
//
// Owns: names and paths in the cache, refs, snapshot links, the completeness check of a model directory.
// Must not: touch the network.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace helium {

// "org/name" with an optional "@revision" (a branch, tag or commit; default "main").
struct RepoRef {
  std::string repo;
  std::string revision = "main";
};

// Parses "org/name[@revision]". The repo id must be two names of letters, digits, '-', '_' and '.',
// neither starting nor ending with '-' or '.', without "--" or ".." (the Hub's own rule).
Result<RepoRef> parse_repo_ref(std::string_view text);
bool is_repo_id(std::string_view text);
// A full 40-hex-digit commit hash (lowercase).
bool is_commit_hash(std::string_view text);
// A path inside a repository that is safe to join to a directory: relative, no "." or ".." segments, no
// empty segments, no backslashes or control characters.
bool is_safe_repo_path(std::string_view path);
// A revision that is safe as a file name under refs/ (it may contain '/', as "refs/pr/1" does).
bool is_safe_revision(std::string_view revision);

// "Qwen/Qwen3-8B" -> "models--Qwen--Qwen3-8B".
std::string repo_folder_name(const std::string& repo);

class HubCache {
 public:
  explicit HubCache(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  std::string repo_dir(const std::string& repo) const;
  std::string blob_path(const std::string& repo, const std::string& etag) const;
  std::string incomplete_path(const std::string& repo, const std::string& etag) const;
  std::string snapshot_dir(const std::string& repo, const std::string& commit) const;
  std::string lock_path(const std::string& repo, const std::string& etag) const;

  // The commit refs/<revision> records, or nullopt when there is no such ref.
  std::optional<std::string> read_ref(const std::string& repo, const std::string& revision) const;
  // Records `commit` for `revision` (written to a temporary file and renamed into place).
  Status write_ref(const std::string& repo, const std::string& revision, const std::string& commit) const;
  // Makes snapshots/<commit>/<path> a relative symlink to blobs/<etag> (replacing a different entry).
  Status link_into_snapshot(const std::string& repo, const std::string& commit, const std::string& path,
                            const std::string& etag) const;
  // The snapshot directory `revision` names, without the network: a commit hash names its own directory,
  // a branch or tag goes through refs/. The error says what is missing and where it was looked for.
  Result<std::string> find_snapshot(const std::string& repo, const std::string& revision) const;

 private:
  std::string root_;
};

// Whether `dir` holds a loadable checkpoint: config.json, tokenizer.json and the weights (every shard
// that model.safetensors.index.json lists, or model.safetensors), none of them a dangling link.
struct ModelDirCheck {
  bool complete = false;
  std::string missing;  // the first missing file, for messages
};
ModelDirCheck check_model_dir(const std::string& dir);

}  // namespace helium
