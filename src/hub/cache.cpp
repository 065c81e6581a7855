// hub/cache.cpp — names, refs and snapshot links of the Hugging Face cache (layout in cache.h).
#include "hub/cache.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/mapped_file.h"

namespace helium {
namespace fs = std::filesystem;
namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

bool is_repo_name_part(std::string_view s) {
  if (s.empty() || s.size() > 96) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
  return s.find("--") == std::string_view::npos && s.find("..") == std::string_view::npos;
}

bool has_control_or_backslash(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return true;
  return false;
}

// Every '/'-separated segment is a proper name (not empty, ".", or "..").
bool segments_are_names(std::string_view path) {
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    std::string_view seg =
        path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

}  // namespace

bool is_repo_id(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || text.find('/', slash + 1) != std::string_view::npos) return false;
  return is_repo_name_part(text.substr(0, slash)) && is_repo_name_part(text.substr(slash + 1));
}

bool is_commit_hash(std::string_view text) {
  if (text.size() != 40) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_safe_repo_path(std::string_view path) {
  return !path.empty() && path.size() < 4096 && !has_control_or_backslash(path) && segments_are_names(path);
}

bool is_safe_revision(std::string_view revision) {
  if (revision.empty() || revision.size() > 256 || has_control_or_backslash(revision)) return false;
  for (char c : revision)
    if (std::isspace(static_cast<unsigned char>(c))) return false;
  return segments_are_names(revision);
}

Result<RepoRef> parse_repo_ref(std::string_view text) {
  RepoRef ref;
  const size_t at = text.find('@');
  std::string_view id = text.substr(0, at);
  if (!is_repo_id(id))
    return Status::error("'" + std::string(text) +
                         "' is not a Hugging Face repo id (expected org/name[@revision])");
  ref.repo = std::string(id);
  if (at != std::string_view::npos) {
    ref.revision = std::string(text.substr(at + 1));
    if (!is_safe_revision(ref.revision))
      return Status::error("'" + std::string(text) + "': '" + ref.revision + "' is not a valid revision");
  }
  return ref;
}

std::string repo_folder_name(const std::string& repo) {
  std::string out = "models--";
  for (char c : repo) {
    if (c == '/')
      out += "--";
    else
      out.push_back(c);
  }
  return out;
}

std::string HubCache::repo_dir(const std::string& repo) const {
  return root_ + "/" + repo_folder_name(repo);
}

std::string HubCache::blob_path(const std::string& repo, const std::string& etag) const {
  return repo_dir(repo) + "/blobs/" + etag;
}

std::string HubCache::incomplete_path(const std::string& repo, const std::string& etag) const {
  return blob_path(repo, etag) + ".incomplete";
}

std::string HubCache::snapshot_dir(const std::string& repo, const std::string& commit) const {
  return repo_dir(repo) + "/snapshots/" + commit;
}

std::string HubCache::lock_path(const std::string& repo, const std::string& etag) const {
  return root_ + "/.locks/" + repo_folder_name(repo) + "/" + etag + ".lock";
}

std::optional<std::string> HubCache::read_ref(const std::string& repo, const std::string& revision) const {
  if (!is_safe_revision(revision)) return std::nullopt;
  std::ifstream f(repo_dir(repo) + "/refs/" + revision);
  std::string commit;
  if (!f || !std::getline(f, commit)) return std::nullopt;
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
  if (!is_commit_hash(commit)) return std::nullopt;
  return commit;
}

Status HubCache::write_ref(const std::string& repo, const std::string& revision,
                           const std::string& commit) const {
  if (!is_safe_revision(revision)) return Status::error("'" + revision + "' is not a valid revision");
  const std::string path = repo_dir(repo) + "/refs/" + revision;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Status::error(path + ": cannot create its directory: " + ec.message());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << commit;  // no newline: huggingface_hub writes the bare hash
    if (!f) return Status::error(tmp + ": cannot write");
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status::error(path + ": cannot write: " + ec.message());
  return Status::ok();
}

Status HubCache::link_into_snapshot(const std::string& repo, const std::string& commit,
                                    const std::string& path, const std::string& etag) const {
  if (!is_safe_repo_path(path))
    return Status::error("unsafe file path in repository " + repo + ": '" + path + "'");
  const fs::path link = fs::path(snapshot_dir(repo, commit)) / path;
  // The link sits in snapshots/<commit>/<directories of path>: one "../" per directory of `path` climbs
  // back to snapshots/<commit>, and "../../" from there is the repo folder.
  std::string target;
  for (char c : path)
    if (c == '/') target += "../";
  target += "../../blobs/" + etag;
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return Status::error(link.parent_path().string() + ": cannot create: " + ec.message());
  if (fs::is_symlink(fs::symlink_status(link, ec))) {
    if (fs::read_symlink(link, ec).string() == target) return Status::ok();
  }
  // Create beside it and rename over: a reader never sees the path missing.
  const fs::path tmp = link.string() + ".tmp." + std::to_string(::getpid());
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) return Status::error(link.string() + ": cannot create a symlink: " + ec.message());
  fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::error(link.string() + ": cannot replace: " + ec.message());
  }
  return Status::ok();
}

Result<std::string> HubCache::find_snapshot(const std::string& repo, const std::string& revision) const {
  std::error_code ec;
  std::string commit = revision;
  if (!is_commit_hash(revision)) {
    auto ref = read_ref(repo, revision);
    if (!ref)
      return Status::error(repo + "@" + revision + " is not in the cache (" + repo_dir(repo) + "/refs/" +
                           revision + " does not exist)");
    commit = *ref;
  }
  const std::string dir = snapshot_dir(repo, commit);
  if (!fs::is_directory(dir, ec))
    return Status::error(repo + "@" + revision + " is not in the cache (" + dir + " does not exist)");
  return dir;
}

ModelDirCheck check_model_dir(const std::string& dir) {
  std::error_code ec;
  auto present = [&](const std::string& name) {
    return fs::is_regular_file(fs::path(dir) / name, ec);
  };  // follows links
  ModelDirCheck check;
  if (!present("config.json")) {
    check.missing = "config.json";
    return check;
  }
  if (present("model.safetensors.index.json")) {
    auto text = read_file(dir + "/model.safetensors.index.json");
    if (!text.is_ok()) {
      check.missing = "model.safetensors.index.json (unreadable)";
      return check;
    }
    nlohmann::json index = nlohmann::json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      check.missing = "model.safetensors.index.json (no weight_map)";
      return check;
    }
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string() || !is_safe_repo_path(file.get<std::string>()) ||
          !present(file.get<std::string>())) {
        check.missing =
            file.is_string() ? file.get<std::string>() : "model.safetensors.index.json (bad entry)";
        return check;
      }
    }
  } else if (!present("model.safetensors")) {
    check.missing = "model.safetensors (or model.safetensors.index.json)";
    return check;
  }
  if (!present("tokenizer.json")) {
    check.missing = "tokenizer.json";
    return check;
  }
  check.complete = true;
  return check;
}

}  // namespace helium
