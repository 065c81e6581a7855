// hub/hub_client.cpp — libcurl requests to the Hub (protocol in hub_client.h).
#include "hub/hub_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "hub/cache.h"
#include "hub/digest.h"

namespace helium {
namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// The headers of one HTTP response (one per hop of a redirect chain), names in lowercase.
struct ResponseHeaders {
  long status = 0;
  std::map<std::string, std::string> fields;
  std::string get(const std::string& name) const {
    auto it = fields.find(name);
    return it == fields.end() ? std::string() : it->second;
  }
};

// The header blocks of every response libcurl sees, including the redirects it follows, and an optional
// check of the Hub's own answer (the first block that names the commit), run as soon as that block ends:
// before libcurl follows its redirect to the CDN. A failed check stops the transfer.
struct HeaderState {
  std::vector<ResponseHeaders> blocks;
  std::function<std::string(const ResponseHeaders&)> check_hub;  // returns an error, or "" when fine
  bool hub_checked = false;
  std::string error;
};

size_t on_header_line(char* data, size_t size, size_t count, void* user) {
  auto* state = static_cast<HeaderState*>(user);
  const size_t n = size * count;
  std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    ResponseHeaders h;
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) h.status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    state->blocks.push_back(std::move(h));
    return n;
  }
  if (trim(line).empty() && !state->blocks.empty()) {  // the end of a block
    const ResponseHeaders& block = state->blocks.back();
    if (state->check_hub && !state->hub_checked && !block.get("x-repo-commit").empty()) {
      state->hub_checked = true;
      state->error = state->check_hub(block);
      if (!state->error.empty()) return 0;  // abort: do not follow the redirect
    }
    return n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string::npos && !state->blocks.empty())
    state->blocks.back().fields[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  return n;
}

struct CurlHandle {
  CURL* curl = curl_easy_init();
  curl_slist* headers = nullptr;
  ~CurlHandle() {
    if (headers) curl_slist_free_all(headers);
    if (curl) curl_easy_cleanup(curl);
  }
};

// Options every request shares: headers (token, user agent), redirects limited to http(s), timeouts.
void configure(CurlHandle& h, const HubSettings& s, const TransferOptions& o, const std::string& url,
               HeaderState* headers) {
  curl_easy_setopt(h.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h.curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h.curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h.curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h.curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(o.connect_timeout_s));
  curl_easy_setopt(h.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h.curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.stall_timeout_s));
  curl_easy_setopt(h.curl, CURLOPT_USERAGENT, s.user_agent.c_str());
  curl_easy_setopt(h.curl, CURLOPT_HEADERFUNCTION, on_header_line);
  curl_easy_setopt(h.curl, CURLOPT_HEADERDATA, headers);
  // A custom Authorization header is sent to the original host only: libcurl (>= 7.58) drops it when a
  // redirect leads elsewhere, so the token never reaches the CDN the Hub redirects LFS files to.
  if (!s.token.empty())
    h.headers = curl_slist_append(h.headers, ("Authorization: Bearer " + s.token).c_str());
  if (h.headers) curl_easy_setopt(h.curl, CURLOPT_HTTPHEADER, h.headers);
}

// A clear message for an HTTP error status of the Hub, with its own X-Error-Message when it sent one.
std::string http_error(long status, const ResponseHeaders& h, const std::string& url, const std::string& what,
                       const std::string& body) {
  std::string msg = what + ": HTTP " + std::to_string(status);
  const std::string code = h.get("x-error-code"), hub_message = h.get("x-error-message");
  if (status == 401)
    msg +=
        " Unauthorized: the repository is private or gated, or the token is not valid (set HF_TOKEN, or log "
        "in "
        "with `hf auth login`)";
  else if (status == 403)
    msg +=
        " Forbidden: the token may not read this repository (a gated model: accept its terms on its Hub "
        "page)";
  else if (status == 404 && code == "RevisionNotFound")
    msg += " Not Found: no such revision";
  else if (status == 404 && code == "EntryNotFound")
    msg += " Not Found: no such file at this revision";
  else if (status == 404)
    msg += " Not Found: no such repository (or it is private: set HF_TOKEN)";
  else if (status == 429)
    msg += " Too Many Requests: rate-limited by the Hub (a token raises the limit)";
  if (!hub_message.empty())
    msg += " [" + hub_message + "]";
  else if (!body.empty() && body.size() < 300 && body.find('<') == std::string::npos)
    msg += " [" + trim(body) + "]";
  return msg + " (" + url + ")";
}

bool retryable_curl(CURLcode c) {
  switch (c) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

bool retryable_status(long status) {
  return status == 408 || status == 429 || status >= 500;
}

std::string offline_error(const std::string& url) {
  return "offline mode (HF_HUB_OFFLINE=1 or --offline): not contacting " + url;
}

bool is_hex(const std::string& s, size_t length) {
  if (s.size() != length) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

std::string url_encode(const std::string& text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string normalize_etag(std::string value) {
  value = trim(std::move(value));
  if (value.rfind("W/", 0) == 0) value = value.substr(2);
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
    value = value.substr(1, value.size() - 2);
  return value;
}

HubClient::HubClient(HubSettings settings, TransferOptions options)
    : settings_(std::move(settings)), options_(options) {
  init_curl_once();
}

std::string HubClient::resolve_url(const std::string& repo, const std::string& revision,
                                   const std::string& path) const {
  return settings_.endpoint + "/" + repo + "/resolve/" + url_encode(revision, false) + "/" +
         url_encode(path, true);
}

Result<RepoInfo> HubClient::repo_info(const std::string& repo, const std::string& revision) const {
  const std::string url =
      settings_.endpoint + "/api/models/" + repo + "/revision/" + url_encode(revision, false) + "?blobs=true";
  const std::string what = repo + "@" + revision;
  if (settings_.offline) return Status::error(what + ": " + offline_error(url));
  std::string body;
  HeaderState headers;
  long status = 0;
  CURLcode rc = CURLE_OK;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    body.clear();
    headers.blocks.clear();
    CurlHandle h;
    if (!h.curl) return Status::error("libcurl: curl_easy_init failed");
    configure(h, settings_, options_, url, &headers);
    curl_easy_setopt(
        h.curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t s, size_t n, void* u) -> size_t {
          auto* out = static_cast<std::string*>(u);
          if (out->size() + s * n > (size_t{256} << 20)) return 0;  // no listing is this large
          out->append(p, s * n);
          return s * n;
        });
    curl_easy_setopt(h.curl, CURLOPT_WRITEDATA, &body);
    rc = curl_easy_perform(h.curl);
    curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &status);
    const bool retry = rc == CURLE_OK ? retryable_status(status) : retryable_curl(rc);
    if (!retry || attempt == options_.max_attempts) break;
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(30000, options_.retry_delay_ms << std::min(attempt - 1, 10))));
  }
  if (rc != CURLE_OK) return Status::error(what + ": " + curl_easy_strerror(rc) + " (" + url + ")");
  const ResponseHeaders last = headers.blocks.empty() ? ResponseHeaders{} : headers.blocks.back();
  if (status != 200) return Status::error(http_error(status, last, url, what, body));

  nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return Status::error(what + ": the Hub's answer is not a JSON object (" + url + ")");
  RepoInfo info;
  info.repo = repo;
  info.revision = revision;
  if (!doc.contains("sha") || !doc["sha"].is_string() || !is_commit_hash(doc["sha"].get<std::string>()))
    return Status::error(what + ": the Hub's answer has no commit hash ('sha') (" + url + ")");
  info.commit = doc["sha"].get<std::string>();
  if (is_commit_hash(revision) && info.commit != revision)
    return Status::error(what + ": the Hub answered for commit " + info.commit + " (" + url + ")");
  if (!doc.contains("siblings") || !doc["siblings"].is_array())
    return Status::error(what + ": the Hub's answer has no file list ('siblings') (" + url + ")");
  for (const auto& s : doc["siblings"]) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string())
      return Status::error(what + ": a 'siblings' entry has no 'rfilename' (" + url + ")");
    RepoFile f;
    f.path = s["rfilename"].get<std::string>();
    if (!is_safe_repo_path(f.path))
      return Status::error(what + ": the listing names an unsafe path '" + f.path + "' (" + url + ")");
    if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"].get<int64_t>();
    if (s.contains("blobId") && s["blobId"].is_string()) f.blob_id = lower(s["blobId"].get<std::string>());
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const auto& lfs = s["lfs"];
      if (lfs.contains("sha256") && lfs["sha256"].is_string())
        f.lfs_sha256 = lower(lfs["sha256"].get<std::string>());
      if (lfs.contains("size") && lfs["size"].is_number_integer()) f.size = lfs["size"].get<int64_t>();
    }
    // The blob name becomes a file name: accept hex hashes only.
    if (!f.lfs_sha256.empty() && !is_hex(f.lfs_sha256, 64))
      return Status::error(what + ": " + f.path + " has a malformed LFS sha256 '" + f.lfs_sha256 + "'");
    if (!f.blob_id.empty() && !is_hex(f.blob_id, 40))
      return Status::error(what + ": " + f.path + " has a malformed blobId '" + f.blob_id + "'");
    info.files.push_back(std::move(f));
  }
  return info;
}

namespace {

// The state of one download across its attempts: the open file, the running hash of what it holds.
struct Transfer {
  const RepoFile* file = nullptr;
  FILE* out = nullptr;
  int64_t written = 0;        // bytes in the file
  int64_t attempt_start = 0;  // bytes in the file when this attempt's request was sent
  std::unique_ptr<Sha256> sha256;
  std::unique_ptr<Sha1> sha1;
  HeaderState headers;
  bool checked_range = false;
  std::string error;       // set by the write callback when it stops the transfer
  std::string error_body;  // the body of an HTTP error response
  int64_t fetched = 0;
  const BytesCallback* on_bytes = nullptr;

  void reset_hash() {
    if (file->is_lfs()) {
      sha256 = std::make_unique<Sha256>();
    } else {
      sha1 = std::make_unique<Sha1>();
      std::string header = "blob " + std::to_string(file->size);
      header.push_back('\0');
      sha1->update(header);
    }
  }
  void hash(const char* p, size_t n) {
    if (sha256) sha256->update(p, n);
    if (sha1) sha1->update(p, n);
  }
  std::string digest() { return sha256 ? sha256->hex_digest() : sha1->hex_digest(); }
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  const auto& blocks = t->headers.blocks;
  const long status = blocks.empty() ? 0 : blocks.back().status;
  if (status >= 300 && status < 400) return n;  // the body of a redirect
  if (status >= 400 || status == 0) {
    if (t->error_body.size() < 4096) t->error_body.append(data, std::min(n, 4096 - t->error_body.size()));
    return n;
  }
  if (!t->checked_range) {
    t->checked_range = true;
    if (status == 200 && t->attempt_start > 0) {
      // The server ignored the Range: start over from byte 0.
      if (std::fflush(t->out) != 0 || ::ftruncate(fileno(t->out), 0) != 0 ||
          std::fseek(t->out, 0, SEEK_SET) != 0) {
        t->error = std::string("cannot truncate the partial file: ") + std::strerror(errno);
        return 0;
      }
      if (*t->on_bytes) (*t->on_bytes)(-t->written);
      t->written = 0;
      t->reset_hash();
    } else if (status == 206) {
      // "Content-Range: bytes <first>-<last>/<size>" must start where the file ends.
      const std::string range = blocks.back().get("content-range");
      const size_t sp = range.find(' ');
      const long long first =
          sp == std::string::npos ? -1 : std::strtoll(range.c_str() + sp + 1, nullptr, 10);
      if (first != t->attempt_start) {
        t->error = "the server answered the range request with '" + range + "', not bytes " +
                   std::to_string(t->attempt_start) + "-";
        return 0;
      }
    }
  }
  if (t->file->size >= 0 && t->written + static_cast<int64_t>(n) > t->file->size) {
    t->error = "the server sent more than the " + std::to_string(t->file->size) + " bytes the listing gives";
    return 0;
  }
  if (std::fwrite(data, 1, n, t->out) != n) {
    t->error = std::string("cannot write: ") + std::strerror(errno);
    return 0;
  }
  t->hash(data, n);
  t->written += static_cast<int64_t>(n);
  t->fetched += static_cast<int64_t>(n);
  if (*t->on_bytes) (*t->on_bytes)(static_cast<int64_t>(n));
  return n;
}

// Checks the Hub's own (first) response against the listing: the commit, the etag and the size.
Status check_hub_headers(const ResponseHeaders& hub, const RepoFile& f, const std::string& commit) {
  const std::string repo_commit = hub.get("x-repo-commit");
  if (!repo_commit.empty() && repo_commit != commit)
    return Status::error("the Hub served it from commit " + repo_commit + ", expected " + commit);
  std::string etag = normalize_etag(hub.get("x-linked-etag"));
  if (etag.empty() && !f.is_lfs()) etag = normalize_etag(hub.get("etag"));
  if (!etag.empty() && lower(etag) != f.etag())
    return Status::error("the Hub's etag " + etag + " differs from the listing's " + f.etag());
  const std::string linked_size = hub.get("x-linked-size");
  if (!linked_size.empty() && f.size >= 0 && std::strtoll(linked_size.c_str(), nullptr, 10) != f.size)
    return Status::error("the Hub gives a size of " + linked_size + " bytes, the listing " +
                         std::to_string(f.size));
  return Status::ok();
}

}  // namespace

Result<DownloadResult> HubClient::download(const std::string& repo, const std::string& commit,
                                           const RepoFile& file, const std::string& incomplete_path,
                                           const BytesCallback& on_bytes) const {
  const std::string url = resolve_url(repo, commit, file.path);
  const std::string what = repo + "/" + file.path;
  if (settings_.offline) return Status::error(what + ": " + offline_error(url));
  if (file.size < 0 || file.etag().empty())
    return Status::error(what + ": the Hub's listing gives no size or hash for it; cannot verify a download");

  DownloadResult result;
  Transfer t;
  t.file = &file;
  t.on_bytes = &on_bytes;
  t.headers.check_hub = [&](const ResponseHeaders& hub) {
    return check_hub_headers(hub, file, commit).message();
  };
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(incomplete_path.c_str(), "ab"), &std::fclose);
  if (!out) return Status::error(incomplete_path + ": cannot open for writing: " + std::strerror(errno));
  t.out = out.get();
  std::error_code ec;
  t.written = static_cast<int64_t>(std::filesystem::file_size(incomplete_path, ec));
  if (ec) return Status::error(incomplete_path + ": " + ec.message());
  if (t.written > file.size) {  // not this file: start over
    if (::ftruncate(fileno(t.out), 0) != 0) return Status::error(incomplete_path + ": cannot truncate");
    t.written = 0;
  }
  result.resumed_from = t.written;
  t.reset_hash();
  if (t.written > 0) {  // the bytes already there count in the hash
    std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(incomplete_path.c_str(), "rb"), &std::fclose);
    if (!in) return Status::error(incomplete_path + ": cannot read: " + std::strerror(errno));
    std::vector<char> buf(size_t{4} << 20);
    int64_t left = t.written;
    while (left > 0) {
      const size_t n =
          std::fread(buf.data(), 1, static_cast<size_t>(std::min<int64_t>(left, buf.size())), in.get());
      if (n == 0) return Status::error(incomplete_path + ": shorter than expected while reading it back");
      t.hash(buf.data(), n);
      left -= static_cast<int64_t>(n);
    }
  }

  std::string last_error;
  while (t.written < file.size && result.attempts < options_.max_attempts) {
    if (result.attempts > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::min(30000, options_.retry_delay_ms << std::min(result.attempts - 1, 10))));
    ++result.attempts;
    t.headers.blocks.clear();
    t.headers.hub_checked = false;
    t.headers.error.clear();
    t.error.clear();
    t.error_body.clear();
    t.checked_range = false;
    t.attempt_start = t.written;
    CurlHandle h;
    if (!h.curl) return Status::error("libcurl: curl_easy_init failed");
    configure(h, settings_, options_, url, &t.headers);
    curl_easy_setopt(h.curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h.curl, CURLOPT_WRITEDATA, &t);
    const std::string range = std::to_string(t.written) + "-";
    if (t.written > 0) curl_easy_setopt(h.curl, CURLOPT_RANGE, range.c_str());
    const CURLcode rc = curl_easy_perform(h.curl);
    std::fflush(t.out);
    long status = 0;
    curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &status);
    if (!t.headers.error.empty()) return Status::error(what + ": " + t.headers.error + " (" + url + ")");
    if (!t.error.empty()) return Status::error(what + ": " + t.error + " (" + url + ")");
    if (rc == CURLE_OK && status == 416 && t.written == file.size) break;  // nothing left to send
    if (rc == CURLE_OK && status >= 400) {
      const ResponseHeaders last = t.headers.blocks.empty() ? ResponseHeaders{} : t.headers.blocks.back();
      last_error = http_error(status, last, url, what, t.error_body);
      if (retryable_status(status)) continue;
      return Status::error(last_error);
    }
    if (rc != CURLE_OK) {
      last_error = what + ": " + curl_easy_strerror(rc) + " after " + std::to_string(t.written) + " of " +
                   std::to_string(file.size) + " bytes (" + url + ")";
      if (retryable_curl(rc)) continue;
      return Status::error(last_error);
    }
    if (t.written < file.size)
      last_error = what + ": the transfer ended after " + std::to_string(t.written) + " of " +
                   std::to_string(file.size) + " bytes (" + url + ")";
  }
  result.bytes_fetched = t.fetched;
  if (t.written < file.size)
    return Status::error(last_error.empty()
                             ? what + ": incomplete"
                             : last_error + " (gave up after " + std::to_string(result.attempts) +
                                   " attempts; " + "run again to resume)");
  out.reset();
  const std::string got = t.digest();
  if (got != file.etag()) {
    std::filesystem::remove(incomplete_path, ec);
    return Status::error(what + ": corrupt download refused and deleted: " +
                         std::string(file.is_lfs() ? "SHA-256" : "git blob SHA-1") + " is " + got +
                         ", expected " + file.etag() + " (" + url + ")");
  }
  return result;
}

}  // namespace helium
