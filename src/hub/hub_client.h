// hub/hub_client.h — the Hugging Face Hub over HTTPS (libcurl): a repository's file list at a revision,
// and one file's download, resumed and verified.
//
// The Hub's protocol, as used here (the same requests huggingface_hub makes):
//   GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true
//     -> {"sha": <commit>, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256", "size"}}]}
//   GET {endpoint}/{repo}/resolve/{commit}/{path}
//     -> a regular file: 200 with the bytes, ETag = its git blob id;
//        an LFS file: 302 to a CDN, carrying X-Linked-Etag (the SHA-256), X-Linked-Size and X-Repo-Commit;
//        those headers come on the Hub's first response and are checked before the redirect is followed.
//   Authorization: Bearer $HF_TOKEN on every request to the endpoint (libcurl drops it on a redirect to
//   another host, so the token never reaches the CDN). Proxies: libcurl's own environment variables.
//
// Owns: HTTP requests, status-to-message mapping, Range resumption and per-file verification.
// Must not: decide which files to fetch or where they go in the cache (pull.h does); print anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/settings.h"

namespace helium {

struct RepoFile {
  std::string path;        // relative path in the repository
  int64_t size = -1;       // bytes (of the real file, not an LFS pointer); -1 when the listing gave none
  std::string blob_id;     // git object id, 40 hex digits
  std::string lfs_sha256;  // 64 hex digits for an LFS file, else empty
  bool is_lfs() const { return !lfs_sha256.empty(); }
  // The file's name in blobs/: the SHA-256 of an LFS file, the git blob id of a regular one.
  const std::string& etag() const { return is_lfs() ? lfs_sha256 : blob_id; }
};

struct RepoInfo {
  std::string repo;
  std::string revision;  // as asked
  std::string commit;    // what it resolved to
  std::vector<RepoFile> files;
};

struct TransferOptions {
  int max_attempts = 6;      // per file: an interrupted transfer is resumed from where it stopped
  int retry_delay_ms = 500;  // doubled after each failed attempt, at most 30 s
  int connect_timeout_s = 20;
  int stall_timeout_s = 60;  // a transfer that moves less than 1 byte/s for this long is restarted
};

// Called from the downloading thread with the number of bytes just written (negative when a server that
// ignored the Range forced a restart from byte 0).
using BytesCallback = std::function<void(int64_t bytes)>;

struct DownloadResult {
  int64_t bytes_fetched = 0;  // over the network (a resumed file's earlier bytes are not counted)
  int attempts = 0;
  int64_t resumed_from = 0;  // the size of the .incomplete file found at the start
};

class HubClient {
 public:
  explicit HubClient(HubSettings settings, TransferOptions options = {});

  const HubSettings& settings() const { return settings_; }

  // The file list of `repo` at `revision` (branch, tag or commit), with sizes and hashes.
  Result<RepoInfo> repo_info(const std::string& repo, const std::string& revision) const;

  // Downloads `file` of `repo` at `commit` into `incomplete_path`: a file already there is continued with
  // a Range request (also after a connection cut mid-transfer, up to max_attempts). When the size is
  // reached the content is checked against the file's SHA-256 (LFS) or git blob id (regular); on a
  // mismatch the partial file is deleted and the error names the file and both hashes. On success the
  // caller moves `incomplete_path` to its blob name.
  Result<DownloadResult> download(const std::string& repo, const std::string& commit, const RepoFile& file,
                                  const std::string& incomplete_path, const BytesCallback& on_bytes) const;

  // The URL of a file (for messages and tests).
  std::string resolve_url(const std::string& repo, const std::string& revision,
                          const std::string& path) const;

 private:
  HubSettings settings_;
  TransferOptions options_;
};

// Percent-encodes everything but RFC 3986 unreserved characters (and '/' when keep_slash).
std::string url_encode(const std::string& text, bool keep_slash);
// An ETag header value without W/ and quotes.
std::string normalize_etag(std::string value);

}  // namespace helium
