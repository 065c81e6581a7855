// report/bench_report.h — `helium bench --submit`: the result a user offers to the project's community
// table, and its submission as a pull request through the GitHub CLI (gh).
// Owns: the payload (what is shared: the machine's kind, never who or where it is), its file name in
// the table, and the gh commands that open the pull request. Must not: measure (engine/speed_test.h
// does) or ask the user (cli/ does).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace helium::report {

using OrderedJson = nlohmann::ordered_json;

// The community table a result goes to: $HELIUM_BENCH_REPO, else kCommunityRepo.
inline constexpr std::string_view kCommunityRepo = "helium-engine/helium";
std::string community_repo();

// What the machine is, read from the system: kinds and sizes only (no serial numbers, host or user names).
struct MachineFacts {
  std::string cpu_model;       // /proc/cpuinfo "model name"
  int logical_cpus = 0;
  double memory_gib = 0;       // total RAM
  std::string os;              // e.g. "Linux 6.1 x86_64" (kernel release's first two numbers)
  static MachineFacts of_this_machine();
};

// Builds the payload: `result` (the bench's JSON: device, model, decode/prefill figures with their
// ceilings) with the machine facts, helium's version and the date (UTC, day only) added.
OrderedJson make_payload(const OrderedJson& result, const MachineFacts& machine, const std::string& helium_version,
                         const std::string& date);

// Refuses a payload that names this user, their home directory or this host (defence in depth: nothing
// put in it should; a model directory's path, say, must not slip in).
Status check_payload_is_anonymous(const std::string& payload_text);

// Where the payload goes in the table: results/<device>/<model>/<date>-<8 hex of the payload's hash>.json,
// each part lower-case [a-z0-9.-].
std::string payload_path(const OrderedJson& payload);

// One gh call; `captures` names the value its standard output gives to later steps ("" for none).
struct GhStep {
  std::vector<std::string> argv;  // argv[0] = "gh"; "<login>", "<base>", "<sha>" stand for captured values
  std::string captures;
  std::string purpose;
};

struct Submission {
  std::string repo;    // OWNER/NAME of the table
  std::string branch;  // in the user's fork
  std::string path;    // of the file added
  std::string title;
  std::string body;
  std::string content;  // the file's text
  std::vector<GhStep> steps;
};

// The pull request for `payload`: fork the table (idempotent), branch from the fork's default branch,
// add the one file, open the pull request. Nothing is run here.
Submission plan_submission(const OrderedJson& payload, const std::string& repo);

// The steps printed for --dry-run, each command shell-quoted, placeholders left in.
std::string describe_submission(const Submission& submission);

// Runs the steps with `gh` (the binary's path), replacing placeholders with what earlier steps printed;
// returns the pull request's URL. Stops at the first failing step with its message and gh's.
Result<std::string> submit(const Submission& submission, const std::filesystem::path& gh);

}  // namespace helium::report
