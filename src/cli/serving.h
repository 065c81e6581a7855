// cli/serving.h — the engine, scheduler and HTTP server behind `helium serve`, built from its options:
// for `serve` (which runs the server on its main thread) and for the agent launchers (which run it on a
// thread while the agent runs). Argument parsing stays in serve.cpp and launch.cpp.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "server/generation_queue.h"
#include "server/http_server.h"

namespace helium::cli {

// Declared in the order they are built; the destructor stops them in reverse (the server's requests end
// before the scheduler shuts down, the scheduler before the engine goes).
struct ServingStack {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<server::SchedulerQueue> queue;
  std::unique_ptr<server::HttpServer> server;
};

// The name clients see: --alias, else a catalog name or repo id as given (its cache directory is a
// commit hash), else the model directory's own name (empty here; the server then takes the directory's).
std::string served_model_name(const ServeOptions& options);

// Resolves and loads the model, starts the scheduler and binds the server (not yet serving: call
// server->run()). Warnings go to stderr; the error names what failed. `log`: the server's request log.
Result<std::unique_ptr<ServingStack>> build_serving_stack(const ServeOptions& options, FILE* log);

}  // namespace helium::cli
