// hub/resolve.h — from what a user types after --model to a local directory the loader can read.
//
// resolve_model(name_or_path, options) accepts, in this order:
//   1. an existing directory: a checkpoint directory or a cache snapshot (used as it is);
//   2. a catalog short name ("35b", "flint", "helium-code-12m"): a local entry is its directory in the
//      source tree; a Hub entry is its pinned revision in the Hugging Face cache;
//   3. a Hugging Face repo id, "org/name" or "org/name@revision" (branch, tag or commit), fetched with
//      default_repo_patterns().
// A Hub model missing from the cache is pulled on first use (unless allow_download is false or the hub
// settings say offline): the plan ("downloading 14 files, 71.9 GB into ...") is printed to options.log
// before the first byte, then progress. An incomplete snapshot is completed (cached blobs are reused).
// Catalog entries this build cannot run (helium_version, supported_families) are refused before any
// download, with the reason from the catalog.
//
// This is the one entry point for `helium run`, `helium info` and `helium serve`: call it with the
// --model argument and load the returned directory.
//
// Owns: the name resolution order, first-use pulls, catalog entry status. Must not: load checkpoints.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/cache.h"
#include "hub/catalog.h"
#include "hub/pull.h"
#include "hub/settings.h"

namespace helium {

// The files fetched for a bare repo id: config, generation config, tokenizer and chat template files,
// and safetensors weights with their index.
std::vector<std::string> default_repo_patterns();

struct ResolveOptions {
  HubSettings hub;
  const Catalog* catalog = nullptr;  // may be null: then only paths and repo ids resolve
  std::string source_dir;            // local catalog entries are relative to it
  bool allow_download = true;        // false: the cache only (helium info never downloads)
  std::string helium_version;        // non-empty: refuse catalog entries not supported by this version
  std::vector<std::string> supported_families;  // non-empty: refuse entries of other families
  int parallel = 4;                             // files downloaded at once
  bool verify_existing = false;                 // hash cached blobs on first use (`helium pull` always does)
  FILE* log = nullptr;                          // plan and progress (nullptr: silent)
  bool interactive = false;                     // progress redrawn in place
  TransferOptions transfer;
};

struct ResolvedModel {
  std::string dir;                      // what to load
  const CatalogEntry* entry = nullptr;  // when named through the catalog
  std::string repo, revision, commit;   // when it comes from the Hub
  int64_t bytes_downloaded = 0;         // by this call
};

Result<ResolvedModel> resolve_model(const std::string& name_or_path, const ResolveOptions& options);

// Where a catalog entry stands on this machine, without the network.
struct EntryStatus {
  bool downloaded = false;    // a complete checkpoint is on disk
  std::string dir;            // its directory, when downloaded
  int64_t bytes_on_disk = 0;  // the size of its files, when downloaded
};
EntryStatus entry_status(const CatalogEntry& entry, const HubCache& cache, const std::string& source_dir);

// The bytes of the regular files under `dir`, following symlinks (a snapshot's size).
int64_t directory_bytes(const std::string& dir);

}  // namespace helium
