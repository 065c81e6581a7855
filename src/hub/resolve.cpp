// hub/resolve.cpp — --model NAME to a directory (order and rules in resolve.h).
#include "hub/resolve.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "hub/progress.h"

namespace helium {
namespace fs = std::filesystem;
namespace {

std::string short_commit(const std::string& revision) {
  return is_commit_hash(revision) ? revision.substr(0, 7) : revision;
}

Result<ResolvedModel> resolve_repo(const std::string& name, const RepoRef& ref,
                                   const std::vector<std::string>& patterns, const ResolveOptions& options,
                                   const CatalogEntry* entry) {
  const HubCache cache(options.hub.cache_dir);
  const std::string label = entry != nullptr ? name + " (" + ref.repo + "@" + short_commit(ref.revision) + ")"
                                             : ref.repo + "@" + ref.revision;
  ResolvedModel resolved;
  resolved.entry = entry;
  resolved.repo = ref.repo;
  resolved.revision = ref.revision;

  std::string why;
  auto snapshot = cache.find_snapshot(ref.repo, ref.revision);
  if (snapshot.is_ok()) {
    const ModelDirCheck check = check_model_dir(snapshot.value());
    if (check.complete) {
      resolved.dir = snapshot.value();
      resolved.commit = fs::path(resolved.dir).filename().string();
      return resolved;
    }
    why = snapshot.value() + " lacks " + check.missing;
  } else {
    why = snapshot.error_message();
  }
  if (options.hub.offline)
    return Status::error(
        label + " is not in the cache and offline mode is on (HF_HUB_OFFLINE=1 or --offline): " + why);
  if (!options.allow_download)
    return Status::error(label + " is not downloaded (" + why + "); fetch it with `helium pull " + name +
                         "`");

  const HubClient client(options.hub, options.transfer);
  PullOptions pull;
  pull.patterns = patterns;
  pull.parallel = options.parallel;
  pull.verify_existing = options.verify_existing;
  pull.progress = options.log;
  pull.interactive = options.interactive;
  HELIUM_ASSIGN_OR_RETURN(PullPlan plan, plan_pull(client, cache, ref, pull));
  if (options.log != nullptr) {
    std::fprintf(options.log, "helium: %s is not in the cache: downloading %d of %zu files, %s",
                 label.c_str(), plan.files_to_fetch(), plan.files.size(),
                 format_bytes(static_cast<double>(plan.bytes_to_fetch())).c_str());
    if (plan.bytes_cached + plan.bytes_partial > 0)
      std::fprintf(options.log, " (%s already here)",
                   format_bytes(static_cast<double>(plan.bytes_cached + plan.bytes_partial)).c_str());
    std::fprintf(options.log, ", from %s into %s\n", options.hub.endpoint.c_str(),
                 cache.repo_dir(ref.repo).c_str());
    std::fflush(options.log);
  }
  HELIUM_ASSIGN_OR_RETURN(PullResult pulled, execute_pull(client, cache, plan, pull));
  const ModelDirCheck check = check_model_dir(pulled.snapshot_dir);
  if (!check.complete)
    return Status::error(label + ": downloaded, but " + check.missing + " is not among the files of " +
                         ref.repo + " at " + pulled.commit + " that match the file patterns");
  resolved.dir = pulled.snapshot_dir;
  resolved.commit = pulled.commit;
  resolved.bytes_downloaded = pulled.bytes_downloaded;
  return resolved;
}

}  // namespace

std::vector<std::string> default_repo_patterns() {
  return {"*.json", "*.safetensors", "*.jinja", "merges.txt", "vocab.txt", "tokenizer.model"};
}

Result<ResolvedModel> resolve_model(const std::string& name_or_path, const ResolveOptions& options) {
  std::error_code ec;
  if (!name_or_path.empty() && fs::is_directory(name_or_path, ec)) {
    ResolvedModel r;
    r.dir = name_or_path;
    return r;
  }
  const CatalogEntry* entry = options.catalog != nullptr ? options.catalog->find(name_or_path) : nullptr;
  if (entry != nullptr) {
    const std::string what = entry->name + " (" + (entry->is_local() ? entry->local_path : entry->repo) +
                             ", " + entry->shape.family + ")";
    if (!options.helium_version.empty() && !supported_by_version(*entry, options.helium_version)) {
      std::string why = entry->supported_since == "unsupported"
                            ? entry->unsupported_reason
                            : "it needs helium " + entry->supported_since + " or later";
      return Status::error(what + " is not supported by helium " + options.helium_version + ": " + why);
    }
    const auto& families = options.supported_families;
    if (!families.empty() &&
        std::find(families.begin(), families.end(), entry->shape.family) == families.end()) {
      std::string list;
      for (const auto& f : families) list += (list.empty() ? "" : ", ") + f;
      return Status::error(what + ": this build has no '" + entry->shape.family +
                           "' model family (it has: " + list + ")");
    }
    if (entry->is_local()) {
      ResolvedModel r;
      r.entry = entry;
      r.dir = options.source_dir.empty() ? entry->local_path : options.source_dir + "/" + entry->local_path;
      const ModelDirCheck check = check_model_dir(r.dir);
      if (!check.complete) return Status::error(what + ": " + r.dir + " lacks " + check.missing);
      return r;
    }
    return resolve_repo(entry->name, RepoRef{entry->repo, entry->revision}, entry->files, options, entry);
  }
  auto ref = parse_repo_ref(name_or_path);
  if (ref.is_ok()) return resolve_repo(name_or_path, ref.value(), default_repo_patterns(), options, nullptr);

  std::string names;
  if (options.catalog != nullptr)
    for (const auto& n : options.catalog->names()) names += (names.empty() ? "" : ", ") + n;
  return Status::error(name_or_path + ": no such directory, and neither a catalog name" +
                       (names.empty() ? std::string() : " (" + names + ")") +
                       " nor a Hugging Face repo id (org/name[@revision])");
}

EntryStatus entry_status(const CatalogEntry& entry, const HubCache& cache, const std::string& source_dir) {
  EntryStatus s;
  std::string dir;
  if (entry.is_local()) {
    dir = source_dir.empty() ? entry.local_path : source_dir + "/" + entry.local_path;
  } else {
    auto snapshot = cache.find_snapshot(entry.repo, entry.revision);
    if (!snapshot.is_ok()) return s;
    dir = snapshot.value();
  }
  if (!check_model_dir(dir).complete) return s;
  s.downloaded = true;
  s.dir = dir;
  s.bytes_on_disk = directory_bytes(dir);
  return s;
}

int64_t directory_bytes(const std::string& dir) {
  std::error_code ec;
  int64_t total = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (fs::is_regular_file(it->path(), e2)) {  // follows the snapshot's symlinks to their blobs
      const auto size = fs::file_size(it->path(), e2);
      if (!e2) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

}  // namespace helium
