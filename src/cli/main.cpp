// cli/main.cpp — the `helium` command: argument parsing and printing only; the work is the engine's.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"helium — local LLM inference engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("helium ") + HELIUM_VERSION);
  helium::cli::RunOptions run;
  helium::cli::add_run_command(app, run);
  helium::cli::InfoOptions info;
  helium::cli::add_info_command(app, info);
  helium::cli::TuneOptions tune;
  helium::cli::add_tune_command(app, tune);
  helium::cli::ModelsOptions models;
  helium::cli::add_models_command(app, models);
  helium::cli::PullCommandOptions pull;
  helium::cli::add_pull_command(app, pull);
  helium::cli::ServeOptions serve;
  helium::cli::add_serve_command(app, serve);
  helium::cli::BenchOptions bench;
  helium::cli::add_bench_command(app, bench);
  helium::cli::LaunchOptions launch;
  helium::cli::add_launch_commands(app, launch);
  try {
    app.parse(helium::cli::take_agent_arguments(argc, argv, launch), argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.got_subcommand("run")) return helium::cli::run_command(run);
  if (app.got_subcommand("info")) return helium::cli::info_command(info);
  if (app.got_subcommand("tune")) return helium::cli::tune_command(tune);
  if (app.got_subcommand("models")) return helium::cli::models_command(models);
  if (app.got_subcommand("pull")) return helium::cli::pull_command(pull);
  if (app.got_subcommand("serve")) return helium::cli::serve_command(serve);
  if (app.got_subcommand("bench")) return helium::cli::bench_command(bench);
  if (int code = helium::cli::launch_command_if_given(launch); code >= 0) return code;
  return 1;
}
