// server/http_server.h — `helium serve`'s HTTP layer: OpenAI (/v1/chat/completions, /v1/completions,
// /v1/responses, /v1/models) and Anthropic (/v1/messages, /v1/messages/count_tokens) routes, /health and
// /metrics, over cpp-httplib with keep-alive and server-sent-event streaming.
// Owns: routing, authentication, body limits, turning requests into engine requests (through the API
// adapters and the prompt renderer) and engine events into responses on the HTTP threads, cancellation
// of generations whose client went away, graceful stop, and the one-JSON-line-per-request log.
// Must not: touch tensors or the KV cache, or block the engine thread (each request has its own
// buffered channel from the engine's callbacks).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/generation_queue.h"
#include "server/prompt_renderer.h"

namespace helium::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (port() says which, after bind())
  std::string api_key;  // non-empty: every route but /health wants `Authorization: Bearer <key>` or `x-api-key: <key>`
  size_t max_body_bytes = size_t{32} << 20;
  int http_threads = 128;  // connections served at once (an idle keep-alive connection holds one too)
  // Output tokens when the request names no limit: the room left in the context, at most this.
  int64_t default_max_tokens = 4096;
  // A request whose prompt plus max tokens exceeds the context is refused with 400 (as OpenAI and
  // Anthropic do); true generates up to the end of the context instead (finish reason "length").
  bool clamp_max_tokens = false;
  // How often a stream that has nothing to say sends a keep-alive (SSE comment, Anthropic ping); the
  // write is also how a client that went away is noticed while its request waits or prefills.
  std::chrono::milliseconds heartbeat{1000};
  FILE* log = stderr;  // one JSON line per request; nullptr: no log
  // Fixes the time templates print with strftime_now (tests); empty: the clock.
  std::string template_time;
};

class HttpServer {
 public:
  HttpServer(ServedModel model, GenerationQueue& queue, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket (the port is taken when this returns).
  Status bind();
  int port() const;
  // Serves until stop(); returns once the listener is closed and the requests in flight have ended.
  Status run();
  // From any thread: stops accepting, cancels every generation in flight (streams end with an error
  // event, waiting requests get 503). Idempotent.
  void stop();

  // The model as served (for the start-up banner).
  const ServedModel& model() const;
  // Why chat routes refuse requests (no chat template, or one that does not parse); empty when they work.
  const std::string& chat_template_error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace helium::server
