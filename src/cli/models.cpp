// cli/models.cpp — `helium models` (the catalog as a table) and the catalog/resolution plumbing the other
// commands share (run, info, pull, serve): where the catalog is, and --model NAME to a directory.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "engine/engine.h"
#include "hub/progress.h"
#include "models/model.h"

namespace helium::cli {

std::string catalog_path() {
  const char* env = std::getenv("HELIUM_CATALOG");
  if (env != nullptr && *env != '\0') return env;
  return std::string(HELIUM_SOURCE_DIR) + "/catalog/models.json";
}

const Catalog* cli_catalog(std::string* error) {
  static const Result<Catalog> catalog = Catalog::load(catalog_path());
  if (!catalog.is_ok()) {
    if (error != nullptr) *error = catalog.error_message();
    return nullptr;
  }
  return &catalog.value();
}

ResolveOptions cli_resolve_options(const Catalog* catalog, bool offline) {
  ResolveOptions o;
  o.hub = HubSettings::from_environment();
  o.hub.user_agent = std::string("helium/") + HELIUM_VERSION;
  if (offline) o.hub.offline = true;
  o.catalog = catalog;
  o.source_dir = HELIUM_SOURCE_DIR;
  o.helium_version = HELIUM_VERSION;
  o.supported_families = supported_model_types();
  o.log = stderr;
  o.interactive = ::isatty(::fileno(stderr)) != 0;
  return o;
}

Result<ResolvedModel> resolve_model_for_cli(const std::string& name, bool offline) {
  std::string catalog_error;
  const Catalog* catalog = nullptr;
  // A directory needs no catalog: a broken catalog file must not stop `run -m DIR`.
  if (::access(name.c_str(), F_OK) != 0) {
    catalog = cli_catalog(&catalog_error);
    if (catalog == nullptr) std::cerr << "helium: warning: " << catalog_error << "\n";
  }
  return resolve_model(name, cli_resolve_options(catalog, offline));
}

void add_pipeline_option(CLI::App* command, std::string& value) {
  command->add_option("--pipeline", value, "Queue each greedy step before the last one's tokens are back: auto (on a GPU), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

std::optional<bool> pipeline_choice(const std::string& value) {
  if (value == "on") return true;
  if (value == "off") return false;
  return std::nullopt;
}

void add_load_format_option(CLI::App* command, std::string& value, const std::string& help) {
  command->add_option("--load-format", value, help)->check(CLI::IsMember({"weights", "dummy"}));
}

LoadFormat load_format_choice(const std::string& value) {
  return value == "dummy" ? LoadFormat::Dummy : LoadFormat::Weights;
}

namespace {

std::string format_count(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%.1fB", static_cast<double>(n) / 1e9);
  else if (n >= 1'000'000)
    std::snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(n) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1fk", static_cast<double>(n) / 1e3);
  return buf;
}

std::string format_context(int64_t n) {
  if (n % 1024 == 0) return std::to_string(n / 1024) + "K";
  return std::to_string(n);
}

}  // namespace

void add_models_command(CLI::App& app, ModelsOptions& o) {
  CLI::App* models =
      app.add_subcommand("models", "List the model catalog: size, family, downloaded, supported");
  models->add_flag("--paths", o.paths, "Also print where each downloaded model is");
}

int models_command(const ModelsOptions& o) {
  std::string error;
  const Catalog* catalog = cli_catalog(&error);
  if (catalog == nullptr) {
    std::cerr << "helium: " << error << "\n";
    return 1;
  }
  const HubSettings hub = HubSettings::from_environment();
  const HubCache cache(hub.cache_dir);
  const std::vector<std::string> families = supported_model_types();
  std::vector<std::string> footnotes;
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "REPO", "FAMILY", "PARAMETERS", "SIZE", "CONTEXT", "DOWNLOADED", "SUPPORTED"}};
  std::vector<std::string> paths = {""};
  for (const auto& e : catalog->entries()) {
    const EntryStatus status = entry_status(e, cache, HELIUM_SOURCE_DIR);
    std::string params = format_count(e.parameters.total);
    if (e.parameters.active != e.parameters.total) params += " (" + format_count(e.parameters.active) + ")";
    std::string size;
    if (status.downloaded) {
      size = format_bytes(static_cast<double>(status.bytes_on_disk));
    } else {
      const double bpp = bytes_per_parameter(e.quantization).value_or(2.0);
      size = "~" + format_bytes(static_cast<double>(e.parameters.total) * bpp);
    }
    const bool family_built = std::find(families.begin(), families.end(), e.shape.family) != families.end();
    std::string supported = "yes";
    if (!supported_by_version(e, HELIUM_VERSION) || !family_built) {
      supported = "no*";
      footnotes.push_back(e.name + ": " +
                          (e.supported_since == "unsupported" ? e.unsupported_reason
                           : !family_built ? "this build has no " + e.shape.family + " family"
                                           : "needs helium " + e.supported_since));
    }
    rows.push_back({e.name, e.is_local() ? e.local_path + " (local)" : e.repo, e.shape.family, params, size,
                    format_context(e.context), status.downloaded ? "yes" : "no", supported});
    paths.push_back(status.downloaded ? status.dir : "");
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows[r].size(); ++i) {
      line += rows[r][i];
      if (i + 1 < rows[r].size()) line += std::string(width[i] - rows[r][i].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
    if (o.paths && !paths[r].empty())
      std::printf("%s%s\n", std::string(width[0] + 2, ' ').c_str(), paths[r].c_str());
  }
  std::printf(
      "\nPARAMETERS: total (active per token) as published. SIZE: on disk when downloaded, else ~ the "
      "weights at the default %s. Cache: %s\n",
      "quantization", cache.root().c_str());
  for (const auto& f : footnotes) std::printf("* %s\n", f.c_str());
  return 0;
}

}  // namespace helium::cli
