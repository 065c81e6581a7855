// cli/serve.cpp — `helium serve`: loads a model, starts the scheduler and the HTTP server, and stops
// them in order on SIGINT/SIGTERM. Argument parsing and printing only; the serving is server/'s.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/serving.h"

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
  add_load_format_option(serve, o.load_format,
                         "weights: read the checkpoint; dummy: deterministic random weights of the config's shapes");
  add_pipeline_option(serve, o.pipeline);
}

int serve_command(const ServeOptions& o) {
  StopSignalWatcher watcher;
  auto built = build_serving_stack(o, stderr);
  if (!built.is_ok()) {
    std::cerr << "helium: " << built.error_message() << "\n";
    return 1;
  }
  ServingStack& stack = *built.value();
  server::HttpServer& server = *stack.server;
  std::fprintf(stderr, "helium: serving %s on http://%s:%d (context %lld tokens, %s, %s)\n", server.model().id.c_str(),
               o.host.c_str(), server.port(), static_cast<long long>(server.model().context),
               stack.engine->backend_name().c_str(), stack.queue->scheduling().c_str());
  std::fflush(stderr);

  Status served = Status::ok();
  if (watcher.watch(&server)) served = server.run();
  watcher.watch(nullptr);
  stack.scheduler->shutdown();
  if (!served.is_ok()) {
    std::cerr << "helium: " << served.message() << "\n";
    return 1;
  }
  std::cerr << "helium: stopped\n";
  return 0;
}

}  // namespace helium::cli
