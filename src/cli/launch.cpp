// cli/launch.cpp — `helium claude|codex|opencode|pi`: serves a model on a private port (or uses a
// running server with --url) and runs the coding agent wired to it on this terminal; the agent's exit
// code is helium's. Argument parsing and printing only: the agents' settings are launch/'s, the serving
// stack serving.h's.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string_view>
#include <thread>

#include "cli/commands.h"
#include "cli/serving.h"
#include "launch/agents.h"
#include "launch/process.h"
#include "launch/server_query.h"
#include "loader/checkpoint.h"

namespace helium::cli {
namespace {

// Closes the request log on every path out of a launch.
struct LogFile {
  FILE* file = nullptr;
  ~LogFile() {
    if (file != nullptr) std::fclose(file);
  }
};

// The endpoint --dry-run prints for a server it does not start: the model's name and context read from
// its checkpoint (nothing is downloaded: a model not yet in the cache is an error here).
Result<launch::Endpoint> planned_endpoint(const LaunchOptions& o) {
  HELIUM_ASSIGN_OR_RETURN(ResolvedModel resolved,
                          resolve_model_for_cli(o.serve.model.empty() ? default_model_path() : o.serve.model, true));
  HELIUM_ASSIGN_OR_RETURN(Checkpoint checkpoint, load_checkpoint(resolved.dir));
  launch::Endpoint e;
  e.base_url = "http://" + o.serve.host + ":" + (o.serve.port == 0 ? std::string("<port>") : std::to_string(o.serve.port));
  e.api_key = o.serve.api_key.empty() ? "<a key of its own>" : o.serve.api_key;
  e.model = served_model_name(o.serve);
  if (e.model.empty()) e.model = std::filesystem::path(resolved.dir).filename().string();
  e.context_tokens = context_for(checkpoint, o.serve.context);
  return e;
}

int launch(const launch::AgentInfo& agent, CLI::App& command, const LaunchOptions& o) {
  std::vector<std::string> agent_args = command.remaining();
  agent_args.insert(agent_args.end(), o.after_separator.begin(), o.after_separator.end());
  const launch::LaunchEnvironment environment = launch::LaunchEnvironment::from_process();
  auto fail = [](const std::string& message) {
    std::cerr << "helium: " << message << "\n";
    return 1;
  };

  // Dry run: the plan, with nothing started, written or downloaded.
  if (o.dry_run) {
    auto endpoint = o.url.empty() ? planned_endpoint(o)
                                  : launch::query_server(o.url, o.serve.api_key, o.serve.model, o.serve.context);
    if (!endpoint.is_ok()) return fail(endpoint.error_message());
    auto plan = launch::plan_launch(agent.agent, endpoint.value(), agent_args, environment);
    if (!plan.is_ok()) return fail(plan.error_message());
    plan->secrets.push_back(endpoint->api_key);
    std::cout << "# " << agent.display_name << " against " << endpoint->model << " at " << endpoint->base_url
              << " (context " << endpoint->context_tokens << " tokens)\n"
              << launch::describe_plan(plan.value());
    return 0;
  }

  const char* path = std::getenv("PATH");
  auto binary = launch::find_executable(agent.binary, path != nullptr ? path : "");
  if (!binary.is_ok())
    return fail(binary.error_message() + "; install " + std::string(agent.display_name) + " with: npm install -g " +
                std::string(agent.npm_package));

  std::unique_ptr<ServingStack> stack;
  std::thread serving;
  LogFile log;
  std::filesystem::path log_path;
  launch::Endpoint endpoint;
  if (!o.url.empty()) {
    auto queried = launch::query_server(o.url, o.serve.api_key, o.serve.model, o.serve.context);
    if (!queried.is_ok()) return fail(queried.error_message());
    endpoint = queried.value();
  } else {
    // The agent's screen is the terminal's: the server's request log goes to a file.
    log_path = environment.cache_dir / "logs" / (std::string(agent.name) + "-server.log");
    std::error_code ec;
    std::filesystem::create_directories(log_path.parent_path(), ec);
    log.file = std::fopen(log_path.c_str(), "a");
    if (log.file == nullptr) return fail(log_path.string() + ": cannot be opened for the server's log");
    std::setvbuf(log.file, nullptr, _IOLBF, 0);
    ServeOptions so = o.serve;
    if (so.api_key.empty()) so.api_key = launch::random_api_key();
    so.clamp_max_tokens = true;  // agents ask for more than a local context holds; generate up to its end
    auto built = build_serving_stack(so, log.file);
    if (!built.is_ok()) return fail(built.error_message());
    stack = std::move(built).value();
    serving = std::thread([&stack] {
      if (Status served = stack->server->run(); !served.is_ok()) std::cerr << "helium: " << served.message() << "\n";
    });
    endpoint.base_url = "http://" + so.host + ":" + std::to_string(stack->server->port());
    endpoint.api_key = so.api_key;
    endpoint.model = stack->server->model().id;
    endpoint.context_tokens = stack->server->model().context;
  }
  auto stop_server = [&] {
    if (!stack) return;
    stack->server->stop();
    serving.join();
    stack.reset();
  };

  auto plan = launch::plan_launch(agent.agent, endpoint, agent_args, environment);
  Status written = plan.is_ok() ? launch::write_plan_files(plan.value()) : plan.status();
  if (!written.is_ok()) {
    stop_server();
    return fail(written.message());
  }
  std::fprintf(stderr, "helium: %s on %s at %s (context %lld tokens%s%s)\n", std::string(agent.display_name).c_str(),
               endpoint.model.c_str(), endpoint.base_url.c_str(), static_cast<long long>(endpoint.context_tokens),
               log_path.empty() ? "" : "; server log: ", log_path.c_str());
  std::fflush(stderr);
  auto code = launch::run_in_foreground(binary.value(), plan.value());
  stop_server();
  if (!code.is_ok()) return fail(code.error_message());
  return code.value();
}

}  // namespace

void add_launch_commands(CLI::App& app, LaunchOptions& o) {
  for (const launch::AgentInfo& agent : launch::known_agents()) {
    CLI::App* command = app.add_subcommand(
        std::string(agent.name), "Run " + std::string(agent.display_name) + " against a local model (serves it, or --url)");
    command->prefix_command();  // from the first argument helium does not know (or after --), the agent's
    command->add_option("-m,--model", o.serve.model,
                        "Catalog name, Hugging Face repo[@revision] or model directory (with --url: the served "
                        "model to use); default: the embedded model");
    command->add_option("--url", o.url, "Use the helium (or other OpenAI/Anthropic-compatible) server at this URL");
    command->add_option("--api-key", o.serve.api_key, "The key of the --url server (default: a fresh one for the server started here)")
        ->envname("HELIUM_API_KEY");
    command->add_option("-c,--ctx-size", o.serve.context, "Context length in tokens (0 = the model's, at most 32768)");
    command->add_option("--port", o.serve.port, "Port of the server started here (0: any free port)")
        ->check(CLI::Range(0, 65535));
    command->add_option("--alias", o.serve.alias, "The model name the agent sees");
    command->add_option("--device", o.serve.device, "Device to run on: auto (a GPU when present), cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    command->add_option("-t,--threads", o.serve.threads, "CPU threads (0 = all)")->check(CLI::NonNegativeNumber);
    command->add_flag("--offline", o.serve.offline, "Never touch the network: use the Hugging Face cache only");
    add_load_format_option(command, o.serve.load_format, "weights, or dummy: random weights of the config's shapes");
    add_pipeline_option(command, o.serve.pipeline);
    command->add_flag("--dry-run", o.dry_run,
                      "Print what would be run (files, environment, command line; the key hidden) and start nothing");
    command->footer("Arguments after the options (or after --) go to " + std::string(agent.binary) +
                    " unchanged, e.g. `helium " + std::string(agent.name) + " -m 8b -- --help`.");
    o.commands.push_back(command);
  }
  o.serve.port = 0;
}

int take_agent_arguments(int argc, char** argv, LaunchOptions& o) {
  if (argc < 2) return argc;
  bool agent = false;
  for (const launch::AgentInfo& info : launch::known_agents()) agent = agent || info.name == argv[1];
  if (!agent) return argc;
  for (int i = 2; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--") continue;
    o.after_separator.assign(argv + i + 1, argv + argc);
    return i;
  }
  return argc;
}

int launch_command_if_given(const LaunchOptions& o) {
  const auto& agents = launch::known_agents();
  for (size_t i = 0; i < agents.size() && i < o.commands.size(); ++i)
    if (o.commands[i]->parsed()) return launch(agents[i], *o.commands[i], o);
  return -1;
}

}  // namespace helium::cli
