// hub/pull.cpp — plan and execute a pull into the Hugging Face cache (see pull.h).
#include "hub/pull.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

#include "hub/digest.h"
#include "hub/progress.h"

namespace helium {
namespace fs = std::filesystem;
namespace {

int64_t file_size_or(const std::string& path, int64_t fallback) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);  // follows symlinks
  return ec ? fallback : static_cast<int64_t>(size);
}

// An exclusive flock() on the blob's lock file, held for the object's lifetime. huggingface_hub's
// filelock takes the same lock on the same path, so the two never write one blob at once.
class BlobLock {
 public:
  static Result<BlobLock> acquire(const std::string& path, DownloadProgress& progress,
                                  const std::string& what) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) return Status::error(path + ": cannot create its directory: " + ec.message());
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Status::error(path + ": cannot open the lock file: " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      progress.note("waiting for another process that is downloading " + what);
      if (::flock(fd, LOCK_EX) != 0) {
        const int err = errno;
        ::close(fd);
        return Status::error(path + ": cannot lock: " + std::strerror(err));
      }
    }
    return BlobLock(fd);
  }
  BlobLock(BlobLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  BlobLock& operator=(BlobLock&&) = delete;
  ~BlobLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }

 private:
  explicit BlobLock(int fd) : fd_(fd) {}
  int fd_;
};

// Checks a blob already in the cache: its size always, its hash when asked.
Status verify_blob(const std::string& blob, const RepoFile& f, bool hash) {
  const int64_t size = file_size_or(blob, -1);
  if (size != f.size)
    return Status::error(blob + " has " + std::to_string(size) + " bytes, the listing says " +
                         std::to_string(f.size));
  if (!hash) return Status::ok();
  HELIUM_ASSIGN_OR_RETURN(std::string got, f.is_lfs() ? sha256_of_file(blob) : git_blob_sha1_of_file(blob));
  if (got != f.etag()) return Status::error(blob + " hashes to " + got + ", expected " + f.etag());
  return Status::ok();
}

}  // namespace

int PullPlan::files_to_fetch() const {
  return static_cast<int>(std::count(cached.begin(), cached.end(), false));
}

bool matches_any(const std::string& path, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return true;
  for (const auto& p : patterns)
    if (::fnmatch(p.c_str(), path.c_str(), 0) == 0) return true;
  return false;
}

Result<PullPlan> plan_pull(const HubClient& client, const HubCache& cache, const RepoRef& ref,
                           const PullOptions& options) {
  PullPlan plan;
  HELIUM_ASSIGN_OR_RETURN(plan.info, client.repo_info(ref.repo, ref.revision));
  for (const auto& f : plan.info.files) {
    if (!matches_any(f.path, options.patterns)) continue;
    if (f.size < 0 || f.etag().empty())
      return Status::error(ref.repo + "@" + ref.revision + ": the listing gives no size or hash for " +
                           f.path);
    const bool cached = file_size_or(cache.blob_path(ref.repo, f.etag()), -1) == f.size;
    plan.files.push_back(f);
    plan.cached.push_back(cached);
    plan.bytes_total += f.size;
    if (cached)
      plan.bytes_cached += f.size;
    else
      plan.bytes_partial +=
          std::clamp<int64_t>(file_size_or(cache.incomplete_path(ref.repo, f.etag()), 0), 0, f.size);
  }
  if (plan.files.empty()) {
    std::string pats;
    for (const auto& p : options.patterns) pats += (pats.empty() ? "" : " ") + p;
    return Status::error(ref.repo + "@" + ref.revision + ": no file matches the patterns (" + pats +
                         ") among its " + std::to_string(plan.info.files.size()) + " files");
  }
  return plan;
}

Result<PullResult> execute_pull(const HubClient& client, const HubCache& cache, const PullPlan& plan,
                                const PullOptions& options) {
  const std::string& repo = plan.info.repo;
  const std::string& commit = plan.info.commit;
  PullResult result;
  result.commit = commit;
  result.files = static_cast<int>(plan.files.size());
  result.snapshot_dir = cache.snapshot_dir(repo, commit);

  DownloadProgress progress(options.progress, options.interactive, plan.bytes_total - plan.bytes_cached,
                            options.plain_interval_s);
  std::mutex mutex;  // guards errors and the result counters
  std::vector<std::string> errors;

  // Every file goes through the pool, largest first (so that the last minutes are not spent on one big
  // file alone): a cached blob is verified (its hash too, with verify_existing: that is reading the
  // whole model, so it is done in parallel) and linked; a damaged one is deleted and downloaded.
  std::vector<size_t> queue(plan.files.size());
  for (size_t i = 0; i < queue.size(); ++i) queue[i] = i;
  std::stable_sort(queue.begin(), queue.end(),
                   [&](size_t a, size_t b) { return plan.files[a].size > plan.files[b].size; });
  if (options.verify_existing && plan.bytes_cached > 0)
    progress.note(
        "verifying " + std::to_string(plan.files.size() - static_cast<size_t>(plan.files_to_fetch())) +
        " files already in the cache (" + format_bytes(static_cast<double>(plan.bytes_cached)) + ")");

  std::error_code ec;
  fs::create_directories(cache.repo_dir(repo) + "/blobs", ec);
  if (ec) return Status::error(cache.repo_dir(repo) + "/blobs: cannot create: " + ec.message());

  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next.fetch_add(1); k < queue.size(); k = next.fetch_add(1)) {
      const RepoFile& f = plan.files[queue[k]];
      const std::string blob = cache.blob_path(repo, f.etag());
      const std::string incomplete = cache.incomplete_path(repo, f.etag());
      auto fail = [&](const Status& s) {
        std::lock_guard<std::mutex> lock(mutex);
        errors.push_back(s.message());
      };
      if (plan.cached[queue[k]]) {
        Status ok = verify_blob(blob, f, options.verify_existing);
        if (ok.is_ok()) {
          Status linked = cache.link_into_snapshot(repo, commit, f.path, f.etag());
          if (!linked.is_ok()) fail(linked);
          std::lock_guard<std::mutex> guard(mutex);
          ++result.files_reused;
          result.bytes_reused += f.size;
          continue;
        }
        progress.note("cached " + f.path + " is damaged (" + ok.message() + "): downloading it again");
        std::error_code remove_error;
        fs::remove(blob, remove_error);
      }
      auto lock = BlobLock::acquire(cache.lock_path(repo, f.etag()), progress, f.path);
      if (!lock.is_ok()) {
        fail(lock.status());
        continue;
      }
      // Another process may have finished this blob while we waited for the lock.
      if (file_size_or(blob, -1) == f.size && verify_blob(blob, f, options.verify_existing).is_ok()) {
        Status linked = cache.link_into_snapshot(repo, commit, f.path, f.etag());
        if (!linked.is_ok()) fail(linked);
        progress.add_bytes(f.size);
        std::lock_guard<std::mutex> guard(mutex);
        ++result.files_reused;
        result.bytes_reused += f.size;
        continue;
      }
      const int64_t partial = std::clamp<int64_t>(file_size_or(incomplete, 0), 0, f.size);
      progress.add_bytes(partial);  // counted as done: those bytes are not fetched again
      auto downloaded =
          client.download(repo, commit, f, incomplete, [&](int64_t n) { progress.add_bytes(n); });
      if (!downloaded.is_ok()) {
        fail(downloaded.status());
        continue;
      }
      std::error_code rename_error;
      fs::rename(incomplete, blob, rename_error);
      if (rename_error) {
        fail(Status::error(blob + ": cannot move the download into place: " + rename_error.message()));
        continue;
      }
      Status linked = cache.link_into_snapshot(repo, commit, f.path, f.etag());
      if (!linked.is_ok()) {
        fail(linked);
        continue;
      }
      progress.file_done(f.path, f.size);
      std::lock_guard<std::mutex> guard(mutex);
      ++result.files_downloaded;
      result.bytes_downloaded += downloaded->bytes_fetched;
    }
  };
  const int threads = std::clamp<int>(options.parallel, 1, 64);
  std::vector<std::thread> pool;
  for (int i = 0; i < std::min<int>(threads, static_cast<int>(queue.size())); ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (!queue.empty()) progress.finish();

  if (!errors.empty()) {
    std::string msg = std::to_string(errors.size()) + " of " + std::to_string(plan.files.size()) +
                      " files of " + repo + "@" + commit + " failed: " + errors.front();
    for (size_t i = 1; i < errors.size() && i < 4; ++i) msg += "; " + errors[i];
    return Status::error(msg);
  }
  if (plan.info.revision != commit) HELIUM_RETURN_IF_ERROR(cache.write_ref(repo, plan.info.revision, commit));
  return result;
}

}  // namespace helium
