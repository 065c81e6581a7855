// tests/launch/server_query_test.cpp — launch::query_server (`helium <agent> --url ...`) against a real HTTP
// server on localhost whose GET /v1/models answers what each case needs: the model and its window taken from
// the list, -c overriding it, the key sent as a bearer token, and a clear refusal for every answer that
// cannot serve a launch (no context length, no models, an unknown model, not JSON, an HTTP error, no key).
#include "launch/server_query.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <string>
#include <thread>

namespace helium::launch {
namespace {

// A localhost server whose /v1/models answers `status` with `body`, and that remembers the Authorization
// header of the last request.
class ModelsServer {
 public:
  ModelsServer(int status, std::string body) : status_(status), body_(std::move(body)) {
    server_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        authorization_ = req.get_header_value("Authorization");
      }
      res.status = status_;
      res.set_content(body_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~ModelsServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string authorization() {
    std::lock_guard<std::mutex> lock(mutex_);
    return authorization_;
  }

 private:
  int status_;
  std::string body_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::string authorization_;
};

constexpr const char* kTwoModels =
    R"({"object": "list", "data": [{"id": "qwen3-8b", "object": "model", "context_length": 32768},
                                   {"id": "qwen3-0.6b", "object": "model", "context_length": 8192}]})";

TEST(ServerQuery, TakesTheModelAndItsWindowFromTheList) {
  ModelsServer server(200, kTwoModels);
  auto first = query_server(server.url(), "sk-test", "", 0);
  ASSERT_TRUE(first.is_ok()) << first.error_message();
  EXPECT_EQ(first.value().base_url, server.url());
  EXPECT_EQ(first.value().api_key, "sk-test");
  EXPECT_EQ(first.value().model, "qwen3-8b");
  EXPECT_EQ(first.value().context_tokens, 32768);
  EXPECT_EQ(server.authorization(), "Bearer sk-test");

  // A named model, a /v1/ suffix, and -c in place of the listed window.
  auto named = query_server(server.url() + "/v1/", "", "qwen3-0.6b", 0);
  ASSERT_TRUE(named.is_ok()) << named.error_message();
  EXPECT_EQ(named.value().base_url, server.url());
  EXPECT_EQ(named.value().model, "qwen3-0.6b");
  EXPECT_EQ(named.value().context_tokens, 8192);
  EXPECT_EQ(server.authorization(), "");  // no key, no header
  auto given = query_server(server.url(), "", "qwen3-0.6b", 4096);
  ASSERT_TRUE(given.is_ok()) << given.error_message();
  EXPECT_EQ(given.value().context_tokens, 4096);
}

TEST(ServerQuery, AServerThatDoesNotSayItsContextNeedsCtxSize) {
  // Other OpenAI-compatible servers list models without a context length (or with one that is not a
  // whole number): the launch needs -c.
  for (const char* body : {R"({"data": [{"id": "m", "object": "model"}]})",
                           R"({"data": [{"id": "m", "context_length": "32768"}]})",
                           R"({"data": [{"id": "m", "context_length": 0}]})"}) {
    ModelsServer server(200, body);
    auto refused = query_server(server.url(), "", "", 0);
    ASSERT_FALSE(refused.is_ok()) << body;
    EXPECT_EQ(refused.error_message(), server.url() + " does not say how long its context is; give it with -c/--ctx-size")
        << body;
    auto given = query_server(server.url(), "", "", 16384);
    ASSERT_TRUE(given.is_ok()) << body << ": " << given.error_message();
    EXPECT_EQ(given.value().model, "m");
    EXPECT_EQ(given.value().context_tokens, 16384);
  }
}

TEST(ServerQuery, AnswersThatCannotServeALaunchAreClearErrors) {
  const struct {
    int status;
    const char* body;
    const char* model;
    std::string message;  // after the server's URL
  } cases[] = {
      {200, R"({"data": []})", "", "/v1/models lists no model"},
      {200, R"({"object": "list"})", "", "/v1/models lists no model"},
      {200, R"([1, 2])", "", "/v1/models lists no model"},
      {200, R"({"data": [{"object": "model"}, {"id": 7}]})", "", "/v1/models lists no model with an id"},
      {200, R"({"data": [{"object": "model"}]})", "m", " does not serve \"m\"; it serves: nothing"},
      {200, kTwoModels, "llama", " does not serve \"llama\"; it serves: qwen3-8b, qwen3-0.6b"},
      {200, "<html>hello</html>", "", "/v1/models did not answer with JSON"},
      {500, R"({"error": "busy"})", "", "/v1/models answered HTTP 500"},
      {404, "", "", "/v1/models answered HTTP 404"},
      {401, R"({"error": "key"})", "", " wants an API key: give it with --api-key or HELIUM_API_KEY"},
  };
  for (const auto& c : cases) {
    ModelsServer server(c.status, c.body);
    auto refused = query_server(server.url(), "", c.model, 0);
    ASSERT_FALSE(refused.is_ok()) << c.body;
    EXPECT_EQ(refused.error_message(), server.url() + c.message) << c.status << " " << c.body;
  }
}

}  // namespace
}  // namespace helium::launch
