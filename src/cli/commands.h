// cli/commands.h — one function per subcommand; each prints errors as "helium: <message>" and returns
// the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace helium::cli {

struct RunOptions {
  CLI::App* command = nullptr;  // to tell which sampling flags were given
  std::string model;
  std::string prompt;
  bool chat = false;
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
  bool show_ids = false;
};

struct InfoOptions {
  std::string model;
  int64_t context = 0;
};

struct TuneOptions {
  std::string model;
  std::string device = "auto";
  std::string load_format = "weights";
};

void add_run_command(CLI::App& app, RunOptions& options);
void add_tune_command(CLI::App& app, TuneOptions& options);
int tune_command(const TuneOptions& options);
void add_info_command(CLI::App& app, InfoOptions& options);
int run_command(const RunOptions& options);
int info_command(const InfoOptions& options);

// The model used when none is named: the embedded default in the source tree.
std::string default_model_path();

}  // namespace helium::cli
