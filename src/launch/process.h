// launch/process.h — carrying out a launch plan: the agent's binary found on PATH, the plan's files
// written, and the agent run in the foreground on helium's terminal until it exits.
// Owns: process creation and the signals of a launch. Must not: know any agent's settings (agents.h).
#pragma once

#include <signal.h>

#include <filesystem>
#include <string>
#include <string_view>

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

// The terminal's signals during a launch. Construct it before any thread starts (threads inherit the
// mask): SIGINT, SIGQUIT, SIGTERM and SIGHUP are then blocked everywhere and only read by
// run_in_foreground. The destructor restores the previous mask.
class LaunchSignals {
 public:
  LaunchSignals();
  ~LaunchSignals();
  LaunchSignals(const LaunchSignals&) = delete;
  LaunchSignals& operator=(const LaunchSignals&) = delete;
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_;
  sigset_t previous_;
};

// Runs `binary` with plan.argv's arguments and the process's environment plus plan.env, on helium's
// terminal, and waits for it. Ctrl-C and Ctrl-\ are the agent's (the terminal sends them to helium too,
// which lets them pass); SIGTERM and SIGHUP sent to helium are passed on to the agent. Returns the
// agent's exit code, or 128 + the signal that ended it.
Result<int> run_in_foreground(const std::filesystem::path& binary, const LaunchPlan& plan, const LaunchSignals& signals);

}  // namespace helium::launch
