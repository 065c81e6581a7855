// tests/server/server_fixture.h — servers for the server tests: the real engine on the embedded default
// model, or a scripted stand-in for the engine whose output is fixed per request (to drive tool calls and
// reasoning through the real parsers and stream writers, which the small default model does not write);
// plus an HTTP client helper and the runner for the node SDK scripts in tools/server.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "server/generation_queue.h"
#include "server/http_server.h"
#include "server/json_fields.h"

namespace helium::server::testing {

// An HttpServer running on its own thread, on an ephemeral port of 127.0.0.1.
class RunningServer {
 public:
  ~RunningServer() { stop(); }
  void start(ServedModel model, GenerationQueue& queue, ServerOptions options);
  void stop();
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  HttpServer& http() { return *server_; }

 private:
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

// The real thing: Engine + Scheduler on the embedded default model (CPU, 2 threads).
class EngineServer {
 public:
  explicit EngineServer(ServerOptions options = {}, SchedulerOptions scheduler_options = {}, int64_t context = 2048);
  ~EngineServer();
  bool ok() const { return engine_ != nullptr; }
  std::string url() const { return running_.url(); }
  int port() const { return running_.port(); }
  HttpServer& http() { return running_.http(); }
  Scheduler& scheduler() { return *scheduler_; }
  const Engine& engine() const { return *engine_; }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<SchedulerQueue> queue_;
  RunningServer running_;
};

// A GenerationQueue that answers each request with a scripted output text, chosen from the rendered
// prompt, streamed token by token (a short pause between tokens) on its own thread. Honours
// max_new_tokens ("length") and stop strings ("stop"), and cancellation.
class ScriptedQueue final : public GenerationQueue {
 public:
  using Script = std::function<std::string(const std::string& prompt_text)>;
  ScriptedQueue(std::shared_ptr<const Tokenizer> tokenizer, Script script);
  ~ScriptedQueue() override;

  Result<RequestId> submit(GenerationRequest request, TokenCallback on_token, DoneCallback on_done) override;
  void cancel(RequestId id) override;
  SchedulerStats stats() const override;
  std::string scheduling() const override { return "scripted"; }

 private:
  struct Job {
    RequestId id;
    GenerationRequest request;
    TokenCallback on_token;
    DoneCallback on_done;
  };
  void run();

  std::shared_ptr<const Tokenizer> tokenizer_;
  Script script_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  RequestId next_id_ = 1;
  RequestId running_ = 0;
  std::atomic<bool> cancel_running_{false};
  bool stopping_ = false;
  SchedulerStats stats_;
  std::thread thread_;
};

// The embedded default model's directory, and the Qwen3 tokenizer (with its chat template) from
// build/npm-tools, used by the scripted servers.
std::string default_model_dir();
std::string qwen3_tokenizer_dir();

// A client for one server; keep-alive, generous read timeout.
std::unique_ptr<httplib::Client> make_client(int port);

// POSTs JSON text and returns the response (status 0 and empty body when the request failed).
struct HttpReply {
  int status = 0;
  std::string body;
  httplib::Headers headers;
  Json json() const;  // the body parsed, or null
};
HttpReply post(int port, const std::string& path, const std::string& body, const httplib::Headers& headers = {});
HttpReply get(int port, const std::string& path, const httplib::Headers& headers = {});

// Node and the SDK packages (openai, @anthropic-ai/sdk) in build/npm-tools.
::testing::AssertionResult node_sdks_available();
// Runs `node tools/server/<script> <npm-tools-dir> <args...>`; returns the exit code (-1 when it could not
// run) and the combined output in `output`.
int run_node_script(const std::string& script, const std::vector<std::string>& args, std::string& output);

}  // namespace helium::server::testing
