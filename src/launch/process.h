// launch/process.h — carrying out a launch plan: the agent's binary found on PATH, the plan's files
// written, and the agent run in the foreground on helium's terminal until it exits; and running a tool
// (gh, for `helium bench --submit`) with its output captured.
// Owns: process creation and the signals of a launch. Must not: know any agent's settings (agents.h).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "launch/agents.h"

namespace helium::launch {

// The first executable `name` in the colon-separated `path_variable`; a name with a slash is taken as
// a path.
Result<std::filesystem::path> find_executable(std::string_view name, std::string_view path_variable);

// Writes each file (its directory created), each through a temporary file renamed over the old one, so a
// failed write leaves the old file whole; an existing file keeps its permission bits.
Status write_plan_files(const LaunchPlan& plan);

// A fresh key for a server only this launch's agent should use: 32 hex digits from the OS's random source.
std::string random_api_key();

// Runs `binary` with plan.argv's arguments and the process's environment plus plan.env, on helium's
// terminal, and waits for it. While it runs, Ctrl-C and Ctrl-\ are the agent's (the terminal sends them
// to helium too, which ignores them), and SIGTERM or SIGHUP sent to helium are passed on to the agent; the
// signals' previous dispositions are restored afterwards (before and after, Ctrl-C stops helium as
// usual). Returns the agent's exit code, or 128 + the signal that ended it.
Result<int> run_in_foreground(const std::filesystem::path& binary, const LaunchPlan& plan);

struct CapturedRun {
  int exit_code = -1;  // 128 + the signal when one ended it
  std::string out;     // standard output
  std::string err;     // standard error
};

// Runs `binary` with `argv` (argv[0] its name) and the process's environment, standard input from
// /dev/null, and collects what it prints. Fails only when it cannot be started.
Result<CapturedRun> run_captured(const std::filesystem::path& binary, const std::vector<std::string>& argv);

}  // namespace helium::launch
