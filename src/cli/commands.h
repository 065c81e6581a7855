// cli/commands.h — one function per subcommand; each prints errors as "helium: <message>" and returns
// the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "hub/resolve.h"
#include "loader/checkpoint.h"

namespace helium::cli {

struct RunOptions {
  CLI::App* command = nullptr;  // to tell which sampling flags were given
  std::string model;
  std::string prompt;
  bool chat = false;
  std::string system;  // --system: with --chat, a system message first
  int max_new_tokens = 256;
  uint64_t seed = 0;
  float temperature = 0.7f;
  float top_p = 0.95f;
  int top_k = 40;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int threads = 0;
  int64_t context = 0;
  std::string device = "auto";
  std::string load_format = "weights";
  std::string pipeline = "auto";  // --pipeline: see add_pipeline_option
  bool show_ids = false;
  bool offline = false;  // never touch the network (also HF_HUB_OFFLINE=1)
};

struct InfoOptions {
  std::string model;
  int64_t context = 0;
  std::string device = "auto";   // the memory plan's device: cpu, cuda, or auto
  std::string gpu_memory;        // e.g. "141GB"; default: an H200
  std::string host_memory;       // default: this machine's RAM
  std::string quantization;      // plan for another weight format (bf16, fp8, int4)
  bool offload_experts = false;
  bool no_drafter = false;
};

struct ModelsOptions {
  bool paths = false;
};

struct PullCommandOptions {
  std::string model;
  bool offline = false;
  int parallel = 4;
  std::vector<std::string> include;
  bool force = false;
  bool no_verify = false;
};

struct TuneOptions {
  std::string model;
  std::string device = "auto";
  std::string load_format = "weights";
};

struct ServeOptions {
  std::string model;
  bool offline = false;  // never touch the network (also HF_HUB_OFFLINE=1)
  std::string alias;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int64_t context = 0;
  std::string device = "auto";
  int threads = 0;
  double max_body_mb = 32;
  size_t max_queued = 256;
  int max_batch = 16;
  int http_threads = 128;
  int64_t default_max_tokens = 4096;
  bool clamp_max_tokens = false;
  int prompt_cache_sequences = 4;
  std::string load_format = "weights";
  std::string pipeline = "auto";
};

struct BenchOptions {
  std::string model;
  std::string device = "auto";
  int threads = 0;
  std::string load_format = "weights";
  std::string pipeline = "auto";
  bool offline = false;
  std::string contexts;   // comma-separated; empty: the device's default
  int64_t tokens = 0;     // 0: the device's default
  int64_t prefill = -1;   // -1: the device's default
  int runs = 3;
  std::string json_path;
  bool submit = false;
  bool dry_run = false;
  bool yes = false;
};

// helium claude|codex|opencode|pi: a server (started here, or --url) and the agent wired to it.
struct LaunchOptions {
  ServeOptions serve;   // the server a launch starts: any free port, a key of its own, max tokens clamped
  std::string url;      // a running server to use instead (its --api-key: serve.api_key)
  bool dry_run = false;
  std::vector<CLI::App*> commands;  // one per agent, in launch::known_agents() order
  std::vector<std::string> after_separator;  // what followed `--`: the agent's, verbatim
};

void add_run_command(CLI::App& app, RunOptions& options);
void add_tune_command(CLI::App& app, TuneOptions& options);
int tune_command(const TuneOptions& options);
void add_info_command(CLI::App& app, InfoOptions& options);
int run_command(const RunOptions& options);
int info_command(const InfoOptions& options);
void add_serve_command(CLI::App& app, ServeOptions& options);
int serve_command(const ServeOptions& options);

// --pipeline auto|on|off: whether plain greedy steps are queued one ahead of the host (EngineOptions::pipeline;
// auto: where the backend queues its work, i.e. on CUDA). Off is for comparing the two loops: same tokens.
void add_pipeline_option(CLI::App* command, std::string& value);
std::optional<bool> pipeline_choice(const std::string& value);

// --load-format weights|dummy (EngineOptions::load_format); `help` says what it means to the command.
void add_load_format_option(CLI::App* command, std::string& value, const std::string& help);
LoadFormat load_format_choice(const std::string& value);

// The model used when none is named: the embedded default in the source tree.
std::string default_model_path();

void add_bench_command(CLI::App& app, BenchOptions& options);
int bench_command(const BenchOptions& options);
void add_launch_commands(CLI::App& app, LaunchOptions& options);
// For `helium <agent> ... -- ARGS`: moves ARGS into options.after_separator and returns the argument
// count without them (CLI11 would read them as helium's positionals); other command lines are unchanged.
int take_agent_arguments(int argc, char** argv, LaunchOptions& options);
// The launch of the agent whose subcommand was given, or -1 when none was.
int launch_command_if_given(const LaunchOptions& options);

void add_models_command(CLI::App& app, ModelsOptions& options);
int models_command(const ModelsOptions& options);
void add_pull_command(CLI::App& app, PullCommandOptions& options);
int pull_command(const PullCommandOptions& options);

// The model catalog: $HELIUM_CATALOG, else catalog/models.json in the source tree.
std::string catalog_path();
// The catalog, read once; nullptr (and the reason in *error) when it cannot be read.
const Catalog* cli_catalog(std::string* error);
// Resolution settings of this build: the HF_* environment (offline forced when asked), helium's version
// and model families (unsupported catalog entries are refused before downloading), plan and progress on
// stderr (redrawn in place on a terminal).
ResolveOptions cli_resolve_options(const Catalog* catalog, bool offline);
// --model NAME|REPO[@rev]|DIR to a directory, pulling on first use (hub/resolve.h has the rules). For
// run and serve; the caller prints the error.
Result<ResolvedModel> resolve_model_for_cli(const std::string& name, bool offline);

}  // namespace helium::cli
