// tests/hub/fake_hub.h — a Hugging Face Hub inside the test process (cpp-httplib on 127.0.0.1), speaking
// the URL layout and headers of huggingface.co:
//   GET /api/models/{org}/{name}/revision/{rev}?blobs=true   {"sha", "siblings": [{rfilename, size, blobId,
//   lfs}]} GET /{org}/{name}/resolve/{rev}/{path}   a regular file: 200 + ETag (git blob id) + X-Repo-Commit;
//                                            an LFS file: 302 to /cdn/<sha256> + X-Linked-Etag,
//                                            X-Linked-Size, X-Repo-Commit, and an ETag of its own (the
//                                            pointer's id)
//   GET /cdn/<sha256>                        the bytes, with Range requests answered 206
// and misbehaving on request: cut a transfer after N bytes, serve wrong bytes, demand a token. It counts
// what it serves so that tests can assert "no request", "only the missing range", "zero re-downloads".
// Any other request (e.g. a proxied one, whose path is an absolute URL) is recorded and answered 404.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace helium::testing {

struct FakeFile {
  std::string path;
  std::string content;
  bool lfs = false;
  std::string sha256, blob_id;  // filled by FakeHub::add_repo (the advertised hashes)
};

struct FakeRepo {
  std::string id;                                                // "org/name"
  std::string commit;                                            // 40 hex digits
  std::map<std::string, std::string> branches = {{"main", ""}};  // branch -> commit ("" = commit)
  std::vector<FakeFile> files;
  std::string token;  // when set, every request for this repo needs "Authorization: Bearer <token>"
};

// A commit-like id for tests: 40 hex digits derived from a seed.
std::string fake_commit(int seed);
// SHA-256 and git blob id as the fake hub advertises them (computed with helium's digest, which
// digest_test checks against the FIPS and git known answers).
std::string sha256_hex(const std::string& data);
std::string git_blob_id(const std::string& data);
// `size` deterministic pseudo-random bytes.
std::string random_bytes(size_t size, uint64_t seed);

class FakeHub {
 public:
  FakeHub();
  ~FakeHub();
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  void add_repo(FakeRepo repo);
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // The next `times` transfers of `path` (any repo) stop after `bytes` bytes: the connection is closed.
  void cut_after(const std::string& path, int64_t bytes, int times = 1);
  // `path` is served with wrong bytes of the right length.
  void serve_wrong_bytes(const std::string& path);
  // The resolve answer for `path` names another etag than the listing (the file changed in between).
  void announce_other_etag(const std::string& path);
  // Each chunk of content is delayed so that transfers overlap (to observe parallelism).
  void set_chunk_delay_ms(int ms) { chunk_delay_ms_ = ms; }

  // What was asked.
  int requests() const { return requests_.load(); }
  int api_requests() const { return api_requests_.load(); }
  int content_requests(const std::string& path) const;  // resolve/cdn GETs that sent bytes of `path`
  int64_t bytes_served(const std::string& path) const;  // content bytes of `path` sent
  std::vector<std::string> ranges(const std::string& path) const;  // Range headers of its content GETs
  std::vector<std::string> authorizations() const;                 // Authorization headers, in order
  std::vector<std::string> paths() const;                          // request paths, in the same order
  std::vector<std::string> other_paths() const;                    // requests that matched no route
  int max_parallel_transfers() const { return max_active_.load(); }

 private:
  struct Blob {
    const FakeRepo* repo;
    const FakeFile* file;
  };
  const FakeRepo* find_repo(const std::string& id) const;
  const FakeFile* find_file(const FakeRepo& repo, const std::string& path) const;
  void record_content(const std::string& path, const std::string& range);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::vector<std::unique_ptr<FakeRepo>> repos_;
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<int64_t, int>> cuts_;  // path -> (bytes, times left)
  std::map<std::string, bool> wrong_bytes_, other_etag_;
  std::map<std::string, int> content_requests_;
  std::map<std::string, int64_t> bytes_served_;
  std::map<std::string, std::vector<std::string>> ranges_;
  std::vector<std::string> authorizations_, paths_;
  std::vector<std::string> other_paths_;
  std::atomic<int> requests_{0}, api_requests_{0}, active_{0}, max_active_{0};
  int chunk_delay_ms_ = 0;
};

}  // namespace helium::testing
