// cli/serve.cpp — `helium serve`: loads a model, starts the scheduler and the HTTP server, and stops
// them in order on SIGINT/SIGTERM. Argument parsing and printing only; the serving is server/'s.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "server/generation_queue.h"
#include "server/http_server.h"

namespace helium::cli {
namespace {

// Waits for SIGINT/SIGTERM on its own thread (the signals are blocked everywhere else, so no thread is
// interrupted in the middle of its work) and asks the server to stop; a second signal while it is
// stopping (say, waiting for a long prefill to end) quits at once.
class StopSignalWatcher {
 public:
  StopSignalWatcher() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    // Before any other thread exists, so that every later thread inherits the mask.
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    thread_ = std::thread([this] {
      for (;;) {
        int signal = 0;
        sigwait(&signals_, &signal);
        std::lock_guard lock(mutex_);
        if (closing_) return;
        if (requested_) {
          std::fputs("helium: stopping now (second signal)\n", stderr);
          std::_Exit(1);
        }
        requested_ = true;
        std::fputs("helium: stopping (send the signal again to quit at once)\n", stderr);
        if (server_) server_->stop();
      }
    });
  }
  ~StopSignalWatcher() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    pthread_kill(thread_.native_handle(), SIGTERM);  // wakes sigwait, which then sees closing_
    thread_.join();
  }
  // Returns false when a stop was already requested (the server should not start).
  bool watch(server::HttpServer* server) {
    std::lock_guard lock(mutex_);
    server_ = server;
    return !requested_;
  }
  bool requested() const { return requested_; }

 private:
  sigset_t signals_;
  std::mutex mutex_;
  server::HttpServer* server_ = nullptr;
  std::atomic<bool> requested_{false};
  bool closing_ = false;
  std::thread thread_;
};

}  // namespace

void add_serve_command(CLI::App& app, ServeOptions& o) {
  CLI::App* serve = app.add_subcommand(
      "serve", "Serve a model over OpenAI- and Anthropic-compatible HTTP APIs (for Claude Code, Codex, OpenCode, pi)");
  serve->add_option("-m,--model", o.model,
                    "Catalog name, Hugging Face repo[@revision] or model directory; default: the embedded model");
  serve->add_flag("--offline", o.offline, "Never touch the network: use the Hugging Face cache only (also HF_HUB_OFFLINE=1)");
  serve->add_option("--alias", o.alias,
                    "The model name clients see (default: the --model name, or the model directory's name)");
  serve->add_option("--host", o.host, "Address to listen on (default 127.0.0.1: this machine only)");
  serve->add_option("--port", o.port, "Port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
  serve->add_option("--api-key", o.api_key,
                    "Require this key on every route but /health (Authorization: Bearer <key> or x-api-key: <key>)")
      ->envname("HELIUM_API_KEY");
  serve->add_option("-c,--ctx-size", o.context, "Context length in tokens (0 = the model's, at most 32768)");
  serve->add_option("--device", o.device, "Device to run on: auto (a GPU when present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  serve->add_option("-t,--threads", o.threads, "CPU threads (0 = all)")->check(CLI::NonNegativeNumber);
  serve->add_option("--max-body-mb", o.max_body_mb, "Largest request body accepted, in MiB")->check(CLI::PositiveNumber);
  serve->add_option("--max-queued", o.max_queued, "Requests that may wait for the engine before new ones get 429")
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-batch", o.max_batch, "Requests that decode together (continuous batching; capped by the engine)")
      ->check(CLI::PositiveNumber);
  serve->add_option("--http-threads", o.http_threads, "Connections served at once")->check(CLI::PositiveNumber);
  serve->add_option("--default-max-tokens", o.default_max_tokens,
                    "Output limit for requests that name none (also capped by the room left in the context)")
      ->check(CLI::PositiveNumber);
  serve->add_flag("--clamp-max-tokens", o.clamp_max_tokens,
                  "Generate up to the end of the context when prompt + max_tokens exceeds it, instead of refusing with 400");
  serve->add_option("--prompt-cache", o.prompt_cache_sequences,
                    "Finished conversations whose KV is kept for reuse by the next turn (0 = off)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--load-format", o.load_format,
                    "weights: read the checkpoint; dummy: deterministic random weights of the config's shapes")
      ->check(CLI::IsMember({"weights", "dummy"}));
}

int serve_command(const ServeOptions& o) {
  StopSignalWatcher watcher;

  EngineOptions eo;
  eo.device = o.device;
  eo.threads = o.threads;
  eo.context = o.context;
  eo.prompt_cache_sequences = o.prompt_cache_sequences;
  eo.load_format = o.load_format == "dummy" ? LoadFormat::Dummy : LoadFormat::Weights;
  auto resolved = resolve_model_for_cli(o.model.empty() ? default_model_path() : o.model, o.offline);
  if (!resolved.is_ok()) {
    std::cerr << "helium: " << resolved.error_message() << "\n";
    return 1;
  }
  // A model named by catalog name or repo is served under that name (its directory in the Hugging Face
  // cache is a commit hash); a directory is served under its own name.
  std::string served_name = o.alias;
  if (served_name.empty() && !o.model.empty() && !std::filesystem::is_directory(o.model)) served_name = o.model;
  auto engine = Engine::load(resolved->dir, eo);
  if (!engine.is_ok()) {
    std::cerr << "helium: " << engine.error_message() << "\n";
    return 1;
  }
  Engine& e = *engine.value();
  for (const auto& w : e.checkpoint().warnings) std::cerr << "helium: warning: " << w << "\n";

  SchedulerOptions scheduler_options;
  scheduler_options.max_queued = o.max_queued;
  scheduler_options.max_batch = o.max_batch;
  Scheduler scheduler(e, scheduler_options);
  const int batch = std::min(scheduler_options.max_batch, e.max_batch());
  server::SchedulerQueue queue(scheduler, "continuous batching: up to " + std::to_string(batch) +
                                              " requests decode together, the others wait in arrival order");

  server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key;
  so.max_body_bytes = static_cast<size_t>(o.max_body_mb * 1024.0 * 1024.0);
  so.http_threads = o.http_threads;
  so.default_max_tokens = o.default_max_tokens;
  so.clamp_max_tokens = o.clamp_max_tokens;
  server::HttpServer server(server::describe_engine_model(e, served_name), queue, so);
  if (!server.chat_template_error().empty())
    std::cerr << "helium: warning: " << server.chat_template_error()
              << "; /v1/chat/completions, /v1/responses and /v1/messages will refuse requests\n";
  if (Status bound = server.bind(); !bound.is_ok()) {
    std::cerr << "helium: " << bound.message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "helium: serving %s on http://%s:%d (context %lld tokens, %s, %s)\n", server.model().id.c_str(),
               o.host.c_str(), server.port(), static_cast<long long>(server.model().context), e.backend_name().c_str(),
               queue.scheduling().c_str());
  std::fflush(stderr);

  Status served = Status::ok();
  if (watcher.watch(&server)) served = server.run();
  watcher.watch(nullptr);
  scheduler.shutdown();
  if (!served.is_ok()) {
    std::cerr << "helium: " << served.message() << "\n";
    return 1;
  }
  std::cerr << "helium: stopped\n";
  return 0;
}

}  // namespace helium::cli
