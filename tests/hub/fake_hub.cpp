// tests/hub/fake_hub.cpp — the in-process Hub of fake_hub.h.
#include "fake_hub.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "hub/digest.h"

namespace helium::testing {

std::string fake_commit(int seed) {
  Sha1 h;
  h.update("commit " + std::to_string(seed));
  return h.hex_digest();
}

std::string sha256_hex(const std::string& data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

std::string git_blob_id(const std::string& data) {
  Sha1 h;
  std::string header = "blob " + std::to_string(data.size());
  header.push_back('\0');
  h.update(header);
  h.update(data);
  return h.hex_digest();
}

std::string random_bytes(size_t size, uint64_t seed) {
  std::string out(size, '\0');
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<char>(x >> 24);
  }
  return out;
}

namespace {

std::string lfs_pointer(const FakeFile& f) {
  return "version https://git-lfs.github.com/spec/v1\noid sha256:" + f.sha256 + "\nsize " +
         std::to_string(f.content.size()) + "\n";
}

void error(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  if (!code.empty()) res.set_header("X-Error-Code", code);
  res.set_header("X-Error-Message", message);
  res.set_content(message, "text/plain");
}

}  // namespace

FakeHub::FakeHub() : server_(std::make_unique<httplib::Server>()) {
  using httplib::Request;
  using httplib::Response;
  auto& s = *server_;

  s.set_pre_routing_handler([this](const Request& req, Response&) {
    ++requests_;
    std::lock_guard<std::mutex> lock(mutex_);
    authorizations_.push_back(req.get_header_value("Authorization"));
    paths_.push_back(req.path);
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Serves `file`'s bytes (wrong ones when asked), honouring Range, cutting the transfer when asked.
  auto serve = [this](const FakeFile& file, const Request& req, Response& res) {
    std::string data = file.content;
    int64_t cut = -1;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (wrong_bytes_.count(file.path))
        for (auto& c : data) c = static_cast<char>(c ^ 0x5a);
      auto it = cuts_.find(file.path);
      if (it != cuts_.end() && it->second.second > 0) {
        cut = it->second.first;
        --it->second.second;
      }
    }
    record_content(file.path, req.get_header_value("Range"));
    const int active = ++active_;
    for (int m = max_active_.load(); active > m && !max_active_.compare_exchange_weak(m, active);) {
    }
    auto shared = std::make_shared<std::string>(std::move(data));
    auto sent = std::make_shared<int64_t>(0);
    const std::string path = file.path;
    res.set_content_provider(
        shared->size(), "application/octet-stream",
        [this, shared, sent, cut, path](size_t offset, size_t length, httplib::DataSink& sink) {
          if (chunk_delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(chunk_delay_ms_));
          size_t n = std::min<size_t>(length, size_t{64} << 10);
          if (cut >= 0) {
            if (*sent >= cut) return false;  // close the connection mid-file
            n = std::min<size_t>(n, static_cast<size_t>(cut - *sent));
          }
          *sent += static_cast<int64_t>(n);
          {
            // Counted before the write: a client that has every byte must never read a smaller count
            // (counting after the write raced with tests that check the count as soon as pull returns).
            std::lock_guard<std::mutex> lock(mutex_);
            bytes_served_[path] += static_cast<int64_t>(n);
          }
          sink.write(shared->data() + offset, n);
          return true;
        },
        [this](bool) { --active_; });
  };

  // Checks the token of a private repo; false when the request was answered with 401.
  auto authorized = [](const FakeRepo& repo, const Request& req, Response& res) {
    if (repo.token.empty() || req.get_header_value("Authorization") == "Bearer " + repo.token) return true;
    error(res, 401, "", "Invalid username or password.");
    return false;
  };
  // The commit a revision names, or "" (and a 404 answer).
  auto commit_of = [](const FakeRepo& repo, const std::string& rev, Response& res) -> std::string {
    if (rev == repo.commit) return rev;
    auto it = repo.branches.find(rev);
    if (it != repo.branches.end()) return it->second.empty() ? repo.commit : it->second;
    error(res, 404, "RevisionNotFound", "Invalid rev id: " + rev);
    return "";
  };

  s.Get(R"(/api/models/([^/]+)/([^/]+)/revision/(.+))", [=, this](const Request& req, Response& res) {
    ++api_requests_;
    const FakeRepo* repo = find_repo(req.matches[1].str() + "/" + req.matches[2].str());
    if (repo == nullptr) return error(res, 404, "RepoNotFound", "Repository not found");
    if (!authorized(*repo, req, res)) return;
    const std::string commit = commit_of(*repo, req.matches[3].str(), res);
    if (commit.empty()) return;
    nlohmann::json doc = {{"id", repo->id}, {"sha", commit}, {"siblings", nlohmann::json::array()}};
    for (const auto& f : repo->files) {
      nlohmann::json sib = {{"rfilename", f.path}, {"size", f.content.size()}, {"blobId", f.blob_id}};
      if (f.lfs)
        sib["lfs"] = {
            {"sha256", f.sha256}, {"size", f.content.size()}, {"pointerSize", lfs_pointer(f).size()}};
      doc["siblings"].push_back(sib);
    }
    res.set_content(doc.dump(), "application/json");
  });

  s.Get(R"(/([^/]+)/([^/]+)/resolve/([^/]+)/(.+))", [=, this](const Request& req, Response& res) {
    const FakeRepo* repo = find_repo(req.matches[1].str() + "/" + req.matches[2].str());
    if (repo == nullptr) return error(res, 404, "RepoNotFound", "Repository not found");
    if (!authorized(*repo, req, res)) return;
    const std::string commit = commit_of(*repo, req.matches[3].str(), res);
    if (commit.empty()) return;
    const FakeFile* file = find_file(*repo, req.matches[4].str());
    if (file == nullptr) return error(res, 404, "EntryNotFound", "Entry not found");
    res.set_header("X-Repo-Commit", commit);
    bool other_etag;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      other_etag = other_etag_.count(file->path) > 0;
    }
    if (file->lfs) {
      const std::string& sha = file->sha256;
      res.set_header("ETag", "\"" + file->blob_id + "\"");
      res.set_header("X-Linked-Etag", "\"" + (other_etag ? sha256_hex("changed") : sha) + "\"");
      res.set_header("X-Linked-Size", std::to_string(file->content.size()));
      res.set_redirect(endpoint() + "/cdn/" + sha, 302);
      return;
    }
    res.set_header("ETag", "\"" + (other_etag ? git_blob_id("changed") : file->blob_id) + "\"");
    serve(*file, req, res);
  });

  s.Get(R"(/cdn/([0-9a-f]{64}))", [=, this](const Request& req, Response& res) {
    const std::string sha = req.matches[1].str();
    const FakeFile* file = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& repo : repos_)
        for (const auto& f : repo->files)
          if (f.lfs && f.sha256 == sha) file = &f;
    }
    if (file == nullptr) return error(res, 404, "", "no such object");
    serve(*file, req, res);
  });

  s.Get(".*", [this](const Request& req, Response& res) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      other_paths_.push_back(req.path);
    }
    error(res, 404, "", "not a Hub URL");
  });

  port_ = s.bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 500 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

FakeHub::~FakeHub() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void FakeHub::add_repo(FakeRepo repo) {
  // A regular file's blob id is its content's; an LFS file's is the pointer's (what git stores).
  for (auto& f : repo.files) {
    f.sha256 = sha256_hex(f.content);
    f.blob_id = f.lfs ? git_blob_id(lfs_pointer(f)) : git_blob_id(f.content);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  repos_.push_back(std::make_unique<FakeRepo>(std::move(repo)));
}

const FakeRepo* FakeHub::find_repo(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& r : repos_)
    if (r->id == id) return r.get();
  return nullptr;
}

const FakeFile* FakeHub::find_file(const FakeRepo& repo, const std::string& path) const {
  for (const auto& f : repo.files)
    if (f.path == path) return &f;
  return nullptr;
}

void FakeHub::record_content(const std::string& path, const std::string& range) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++content_requests_[path];
  ranges_[path].push_back(range);
}

void FakeHub::cut_after(const std::string& path, int64_t bytes, int times) {
  std::lock_guard<std::mutex> lock(mutex_);
  cuts_[path] = {bytes, times};
}

void FakeHub::announce_other_etag(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  other_etag_[path] = true;
}

void FakeHub::serve_wrong_bytes(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  wrong_bytes_[path] = true;
}

int FakeHub::content_requests(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = content_requests_.find(path);
  return it == content_requests_.end() ? 0 : it->second;
}

int64_t FakeHub::bytes_served(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = bytes_served_.find(path);
  return it == bytes_served_.end() ? 0 : it->second;
}

std::vector<std::string> FakeHub::ranges(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.find(path);
  return it == ranges_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> FakeHub::authorizations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return authorizations_;
}

std::vector<std::string> FakeHub::paths() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return paths_;
}

std::vector<std::string> FakeHub::other_paths() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return other_paths_;
}

}  // namespace helium::testing
