// cli/serving.cpp — builds the serving stack of cli/serving.h.
#include "cli/serving.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace helium::cli {

std::string served_model_name(const ServeOptions& o) {
  if (!o.alias.empty()) return o.alias;
  if (!o.model.empty() && !std::filesystem::is_directory(o.model)) return o.model;
  return "";
}

Result<std::unique_ptr<ServingStack>> build_serving_stack(const ServeOptions& o, FILE* log) {
  EngineOptions eo;
  eo.device = o.device;
  eo.threads = o.threads;
  eo.context = o.context;
  eo.prompt_cache_sequences = o.prompt_cache_sequences;
  eo.load_format = load_format_choice(o.load_format);
  eo.pipeline = pipeline_choice(o.pipeline);
  HELIUM_ASSIGN_OR_RETURN(ResolvedModel resolved,
                          resolve_model_for_cli(o.model.empty() ? default_model_path() : o.model, o.offline));
  auto stack = std::make_unique<ServingStack>();
  HELIUM_ASSIGN_OR_RETURN(stack->engine, Engine::load(resolved.dir, eo));
  Engine& e = *stack->engine;
  for (const auto& w : e.checkpoint().warnings) std::cerr << "helium: warning: " << w << "\n";

  SchedulerOptions scheduler_options;
  scheduler_options.max_queued = o.max_queued;
  scheduler_options.max_batch = o.max_batch;
  stack->scheduler = std::make_unique<Scheduler>(e, scheduler_options);
  const int batch = std::min(scheduler_options.max_batch, e.max_batch());
  stack->queue = std::make_unique<server::SchedulerQueue>(
      *stack->scheduler, "continuous batching: up to " + std::to_string(batch) +
                             " requests decode together, the others wait in arrival order");

  server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key;
  so.max_body_bytes = static_cast<size_t>(o.max_body_mb * 1024.0 * 1024.0);
  so.http_threads = o.http_threads;
  so.default_max_tokens = o.default_max_tokens;
  so.clamp_max_tokens = o.clamp_max_tokens;
  so.log = log;
  stack->server = std::make_unique<server::HttpServer>(server::describe_engine_model(e, served_model_name(o)),
                                                       *stack->queue, so);
  if (!stack->server->chat_template_error().empty())
    std::cerr << "helium: warning: " << stack->server->chat_template_error()
              << "; /v1/chat/completions, /v1/responses and /v1/messages will refuse requests\n";
  HELIUM_RETURN_IF_ERROR(stack->server->bind());
  return stack;
}

}  // namespace helium::cli
