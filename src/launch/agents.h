// launch/agents.h — `helium claude|codex|opencode|pi`: how each coding agent is pointed at a helium
// server (its environment, arguments and configuration), as a plan that can be printed or carried out.
// Owns: the agents' names, binaries and npm packages, and each one's settings for a local endpoint
// (research and captured traffic: ../shared/notes/agents.md, docs/ARCHITECTURE.md "Launchers").
// Must not: start servers, load models or spawn processes (cli/ and launch/process.h do); it reads the
// one configuration file it merges into (pi's models.json) and writes nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace helium::launch {

enum class Agent { kClaude, kCodex, kOpenCode, kPi };

struct AgentInfo {
  Agent agent;
  std::string_view name;         // the subcommand: claude, codex, opencode, pi
  std::string_view binary;       // looked for on PATH
  std::string_view npm_package;  // what installs it
  std::string_view display_name;
};

// The four agents, in the order `helium --help` lists them.
const std::vector<AgentInfo>& known_agents();
const AgentInfo& agent_info(Agent agent);

// The server an agent talks to.
struct Endpoint {
  std::string base_url;        // http://127.0.0.1:PORT, without /v1
  std::string api_key;         // sent by the agent on every request; may be empty for a server without one
  std::string model;           // the id the server's /v1/models lists
  int64_t context_tokens = 0;  // the server's context: agents compact their conversations to fit it
};

// Where the agents keep their settings, from the environment of the process that launches them.
struct LaunchEnvironment {
  std::filesystem::path home;             // $HOME
  std::filesystem::path cache_dir;        // helium_cache_dir() (core/cache_dir.h): files helium owns
  std::filesystem::path pi_agent_dir;     // $PI_CODING_AGENT_DIR or ~/.pi/agent
  static LaunchEnvironment from_process();
};

struct FileToWrite {
  std::filesystem::path path;
  std::string content;
};

// Everything a launch does besides starting the server: files first, then argv run with the process's
// environment plus `env` (an empty value is set empty, not removed).
struct LaunchPlan {
  std::vector<std::string> argv;  // argv[0]: the binary's name, found on PATH when run
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<FileToWrite> files;
  std::vector<std::string> secrets;  // values (the API key) a printed plan shows as <hidden>
};

// Codex's catalog entry for a model: the shape of a model_catalog_json file's `models` and of the
// `models` list helium's GET /v1/models adds for Codex. Without one Codex warns and guesses the window.
nlohmann::ordered_json codex_catalog_entry(const std::string& model, int64_t context_tokens);

// The output-token ceiling an agent is told to ask for: a quarter of the context (an agent's prompt
// fills most of it), between 1,024 and 32,000 tokens.
int64_t agent_max_output_tokens(int64_t context_tokens);

// The plan for `agent` against `endpoint`; `agent_args` (what followed `--` or the options helium does
// not know) go after the arguments helium adds, so a user's own flags win where the agent lets the last
// one win. Fails when a configuration file it must merge into cannot be read or is not valid JSON (the
// file is left as it is).
Result<LaunchPlan> plan_launch(Agent agent, const Endpoint& endpoint, const std::vector<std::string>& agent_args,
                               const LaunchEnvironment& environment);

// The plan as a shell reader would check it: each file with its content, then the environment and the
// command line, shell-quoted, with the secrets shown as <hidden>.
std::string describe_plan(const LaunchPlan& plan);

// A word quoted for a POSIX shell when it needs to be.
std::string shell_quote(std::string_view word);

}  // namespace helium::launch
