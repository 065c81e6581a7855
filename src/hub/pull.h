// hub/pull.h — `helium pull`: bring a repository's files at a revision into the Hugging Face cache.
// Plan first (the listing, which files match, which blobs are already there, how much is left), then
// download the rest several files at a time, verify each, and link the snapshot.
//
// Blobs already in the cache (from an earlier pull, or from huggingface_hub) are reused without a request:
// their size is checked and, with verify_existing, their hash; a blob that fails is deleted and fetched
// again. A `.incomplete` file left by an interrupted download (ours or huggingface_hub's) is continued.
// Two processes pulling the same blob serialise on the lock file huggingface_hub uses.
//
// Owns: the pull plan and its execution. Must not: print except through DownloadProgress, or decide where
// the cache is (HubSettings does).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/cache.h"
#include "hub/hub_client.h"

namespace helium {

struct PullOptions {
  std::vector<std::string>
      patterns;                   // fnmatch patterns of the files to fetch ('*' also matches '/'); empty: all
  int parallel = 4;               // files downloaded at once
  bool verify_existing = true;    // hash blobs already in the cache before reusing them
  FILE* progress = nullptr;       // where progress goes (nullptr: silent)
  bool interactive = false;       // progress redrawn in place (a terminal) rather than plain lines
  double plain_interval_s = 5.0;  // seconds between plain progress lines
};

struct PullPlan {
  RepoInfo info;
  std::vector<RepoFile> files;  // the matched files, in listing order
  std::vector<bool> cached;     // files[i]'s blob is already in the cache (not yet verified)
  int64_t bytes_total = 0;      // of the matched files
  int64_t bytes_cached = 0;     // of the cached blobs
  int64_t bytes_partial = 0;    // already in .incomplete files, to be continued
  int64_t bytes_to_fetch() const { return bytes_total - bytes_cached - bytes_partial; }
  int files_to_fetch() const;
};

struct PullResult {
  std::string snapshot_dir;
  std::string commit;
  int files = 0;
  int files_downloaded = 0;
  int files_reused = 0;
  int64_t bytes_downloaded = 0;  // over the network
  int64_t bytes_reused = 0;
};

// Whether `path` matches one of `patterns` (all paths match an empty list).
bool matches_any(const std::string& path, const std::vector<std::string>& patterns);

// Lists the repository at `revision` (one request) and compares it with the cache.
Result<PullPlan> plan_pull(const HubClient& client, const HubCache& cache, const RepoRef& ref,
                           const PullOptions& options);

// Downloads what the plan lacks, verifies, links snapshots/<commit>/..., and records refs/<revision>.
// Files that fail do not stop the others (their bytes are kept for the next attempt); the error names
// each failed file.
Result<PullResult> execute_pull(const HubClient& client, const HubCache& cache, const PullPlan& plan,
                                const PullOptions& options);

}  // namespace helium
