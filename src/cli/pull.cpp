// cli/pull.cpp — `helium pull NAME|REPO[@rev]`: list the repository, download what the cache lacks (several
// files at once, resumed, verified), link the snapshot, print its directory on stdout.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "hub/progress.h"
#include "models/model.h"

namespace helium::cli {

void add_pull_command(CLI::App& app, PullCommandOptions& o) {
  CLI::App* pull = app.add_subcommand(
      "pull", "Download a model into the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub)");
  pull->add_option("model", o.model,
                   "A catalog name (see `helium models`) or a Hugging Face repo id, org/name[@revision]")
      ->required();
  pull->add_flag("--offline", o.offline,
                 "Never touch the network: only check the cache (also HF_HUB_OFFLINE=1)");
  pull->add_option("-j,--parallel", o.parallel, "Files downloaded at once")->check(CLI::Range(1, 64));
  pull->add_option("--include", o.include,
                   "File patterns to fetch instead of the catalog's (repeatable, e.g. '*.json')")
      ->allow_extra_args(false);  // one pattern per --include: the model name must not be taken for one
  pull->add_flag("--force", o.force, "Download a catalog model even if this build cannot run it yet");
  pull->add_flag("--no-verify", o.no_verify,
                 "Trust blobs already in the cache (check their size, not their hash)");
}

int pull_command(const PullCommandOptions& o) {
  auto fail = [](const std::string& message) {
    std::cerr << "helium: " << message << "\n";
    return 1;
  };
  std::string catalog_error;
  const Catalog* catalog = cli_catalog(&catalog_error);
  ResolveOptions ro = cli_resolve_options(catalog, o.offline);

  // What to fetch: a catalog entry's repo, revision and files, or a repo id with the default files.
  RepoRef ref;
  std::vector<std::string> patterns = default_repo_patterns();
  std::string label;
  const CatalogEntry* entry = catalog != nullptr ? catalog->find(o.model) : nullptr;
  if (entry != nullptr) {
    if (entry->is_local())
      return fail(entry->name + " is part of helium's source tree (" + entry->local_path +
                  "): nothing to pull");
    const auto& families = ro.supported_families;
    const bool family_built =
        std::find(families.begin(), families.end(), entry->shape.family) != families.end();
    if (!o.force && (!supported_by_version(*entry, HELIUM_VERSION) || !family_built))
      return fail(
          entry->name + " (" + entry->repo + ") cannot run on helium " + HELIUM_VERSION + ": " +
          (entry->supported_since == "unsupported" ? entry->unsupported_reason : "needs a newer helium") +
          " (--force downloads it anyway)");
    ref = RepoRef{entry->repo, entry->revision};
    patterns = entry->files;
    label = entry->name + " (" + entry->repo + "@" + entry->revision.substr(0, 12) + ")";
  } else {
    auto parsed = parse_repo_ref(o.model);
    if (!parsed.is_ok())
      return fail(
          o.model + " is neither a catalog name" +
          (catalog != nullptr ? std::string() : " (the catalog could not be read: " + catalog_error + ")") +
          " nor a Hugging Face repo id (org/name[@revision])");
    ref = parsed.value();
    label = ref.repo + "@" + ref.revision;
  }
  if (!o.include.empty()) patterns = o.include;

  const HubCache cache(ro.hub.cache_dir);
  if (ro.hub.offline) {
    auto snapshot = cache.find_snapshot(ref.repo, ref.revision);
    if (!snapshot.is_ok())
      return fail(label + ": offline mode (HF_HUB_OFFLINE=1 or --offline) and not in the cache: " +
                  snapshot.error_message());
    const ModelDirCheck check = check_model_dir(snapshot.value());
    if (!check.complete)
      return fail(label + ": offline mode, and " + snapshot.value() + " lacks " + check.missing);
    std::cerr << "helium: " << label << " is in the cache (offline: not checked against the Hub)\n";
    std::cout << snapshot.value() << "\n";
    return 0;
  }

  const HubClient client(ro.hub, ro.transfer);
  PullOptions po;
  po.patterns = patterns;
  po.parallel = o.parallel;
  po.verify_existing = !o.no_verify;
  po.progress = stderr;
  po.interactive = ::isatty(::fileno(stderr)) != 0;
  auto plan = plan_pull(client, cache, ref, po);
  if (!plan.is_ok()) return fail(plan.error_message());
  const PullPlan& p = plan.value();
  if (p.files_to_fetch() == 0) {
    std::fprintf(stderr, "helium: %s: all %zu files are in the cache (%s); verifying them\n", label.c_str(),
                 p.files.size(), format_bytes(static_cast<double>(p.bytes_total)).c_str());
  } else {
    std::fprintf(stderr, "helium: pulling %s at %s: downloading %d of %zu files, %s", label.c_str(),
                 p.info.commit.c_str(), p.files_to_fetch(), p.files.size(),
                 format_bytes(static_cast<double>(p.bytes_to_fetch())).c_str());
    if (p.bytes_cached + p.bytes_partial > 0)
      std::fprintf(stderr, " (%s already here)",
                   format_bytes(static_cast<double>(p.bytes_cached + p.bytes_partial)).c_str());
    std::fprintf(stderr, ", from %s into %s\n", ro.hub.endpoint.c_str(), cache.repo_dir(ref.repo).c_str());
  }
  auto result = execute_pull(client, cache, p, po);
  if (!result.is_ok()) return fail(result.error_message());
  const ModelDirCheck check = check_model_dir(result->snapshot_dir);
  if (!check.complete)
    std::cerr << "helium: warning: " << result->snapshot_dir << " lacks " << check.missing
              << ": helium cannot load it as it is\n";
  std::fprintf(stderr, "helium: %s: %d files downloaded (%s), %d reused\n", label.c_str(),
               result->files_downloaded, format_bytes(static_cast<double>(result->bytes_downloaded)).c_str(),
               result->files_reused);
  std::cout << result->snapshot_dir << "\n";
  return 0;
}

}  // namespace helium::cli
