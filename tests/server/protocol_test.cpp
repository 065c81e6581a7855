// tests/server/protocol_test.cpp — the server over raw HTTP with bad and hostile input: invalid JSON,
// wrong types, missing and unknown fields, invalid UTF-8, oversize bodies, wrong keys, unknown routes,
// clients that vanish mid-stream, 50 concurrent streams (each must get exactly its own tokens), a full
// queue, prompts too long for the context; plus the prompt cache across turns, the request log,
// /metrics, /health and shutdown. Every request is answered or cleanly refused and the server stays up.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <latch>
#include <sstream>
#include <thread>

#include "server_fixture.h"

namespace helium::server::testing {
namespace {

using namespace std::chrono_literals;

const std::string kChatPath = "/v1/chat/completions";

std::string chat_body(const std::string& user, int max_tokens, const Json& extra = Json::object()) {
  Json body = {{"model", "any"}, {"messages", {{{"role", "user"}, {"content", user}}}}, {"max_tokens", max_tokens},
               {"temperature", 0}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return dump_json(body);
}

// The default model's end-of-sequence ids, banned so that generation runs to max_tokens.
Json no_eos_bias() { return {{"0", -100}, {"2", -100}}; }

void expect_openai_error(const HttpReply& reply, int status, const std::string& fragment) {
  EXPECT_EQ(reply.status, status) << reply.body;
  const Json body = reply.json();
  ASSERT_TRUE(body.is_object() && body.contains("error")) << reply.body;
  EXPECT_TRUE(body["error"]["type"].is_string()) << reply.body;
  EXPECT_NE(body["error"]["message"].get<std::string>().find(fragment), std::string::npos)
      << "message should mention `" << fragment << "`: " << reply.body;
}

void expect_anthropic_error(const HttpReply& reply, int status, const std::string& type, const std::string& fragment) {
  EXPECT_EQ(reply.status, status) << reply.body;
  const Json body = reply.json();
  ASSERT_TRUE(body.is_object()) << reply.body;
  EXPECT_EQ(body.value("type", ""), "error") << reply.body;
  EXPECT_EQ(body["error"].value("type", ""), type) << reply.body;
  EXPECT_NE(body["error"].value("message", "").find(fragment), std::string::npos)
      << "message should mention `" << fragment << "`: " << reply.body;
}

void expect_alive(int port) {
  const HttpReply reply = post(port, kChatPath, chat_body("def f():", 2));
  EXPECT_EQ(reply.status, 200) << reply.body;
}

// The text of a chat-completions stream, and whether it ended properly.
struct StreamedChat {
  int status = 0;
  std::string text;
  std::string finish_reason;
  bool done = false;  // saw data: [DONE]
};

StreamedChat stream_chat(int port, const std::string& body) {
  StreamedChat out;
  auto client = make_client(port);
  auto res = client->Post(kChatPath, httplib::Headers{}, body, "application/json");
  if (!res) {
    out.text = "request failed: " + httplib::to_string(res.error());
    return out;
  }
  out.status = res->status;
  std::istringstream lines(res->body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    const Json chunk = Json::parse(data, nullptr, false);
    if (chunk.is_discarded() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
    const Json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content")) out.text += choice["delta"]["content"].get<std::string>();
    if (choice["finish_reason"].is_string()) out.finish_reason = choice["finish_reason"].get<std::string>();
  }
  return out;
}

// A raw socket, to be able to walk away from a response half-way.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string raw_request(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(ServerBadInput, InvalidJsonGets400InTheRoutesShape) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  expect_openai_error(post(server.port(), kChatPath, "{not json"), 400, "not valid JSON");
  expect_openai_error(post(server.port(), kChatPath, ""), 400, "empty");
  expect_anthropic_error(post(server.port(), "/v1/messages", "[1,2"), 400, "invalid_request_error", "not valid JSON");
  expect_openai_error(post(server.port(), "/v1/responses", "\"just a string\""), 400, "JSON object");
  expect_alive(server.port());
}

TEST(ServerBadInput, WrongTypesAndMissingFieldsNameTheField) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  const Json user = {{{"role", "user"}, {"content", "hi"}}};
  struct Case {
    std::string path;
    Json body;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {kChatPath, Json::object(), "`messages` is required"},
      {kChatPath, {{"messages", "hi"}}, "`messages` must be an array"},
      {kChatPath, {{"messages", Json::array()}}, "at least one message"},
      {kChatPath, {{"messages", {{{"content", "x"}}}}}, "`messages[0].role` is required"},
      {kChatPath, {{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content"},
      {kChatPath, {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "messages[0].role"},
      {kChatPath, {{"messages", user}, {"max_tokens", "8"}}, "`max_tokens` must be an integer"},
      {kChatPath, {{"messages", user}, {"max_tokens", -3}}, "max_tokens"},
      {kChatPath, {{"messages", user}, {"stream", "yes"}}, "`stream` must be a boolean"},
      {kChatPath, {{"messages", user}, {"stop", {1}}}, "stop[0]"},
      {kChatPath, {{"messages", user}, {"temperature", -1}}, "temperature"},
      {kChatPath, {{"messages", user}, {"logit_bias", {{"abc", 1}}}}, "logit_bias"},
      {kChatPath, {{"messages", user}, {"tools", {{{"type", "function"}}}}}, "tools[0].function"},
      {kChatPath, {{"messages", user}, {"n", 3}}, "`n` must be 1"},
      {kChatPath, {{"messages", user}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {kChatPath, {{"messages", user}, {"response_format", {{"type", "xml"}}}}, "response_format.type"},
      {"/v1/responses", {{"input", {{{"type", "function_call_output"}}}}}, "input[0].call_id"},
      {"/v1/responses", {{"input", "hi"}, {"tools", {{{"name", "x"}}}}}, "tools[0].type"},
      {"/v1/responses", {{"input", "hi"}, {"max_output_tokens", 1.5}}, "max_output_tokens"},
      {"/v1/completions", {{"prompt", Json::object()}}, "prompt"},
      {"/v1/completions", {{"prompt", {99999999}}}, "prompt[0]"},
      {"/v1/completions", {{"prompt", {"a", "b"}}}, "one prompt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + dump_json(c.body));
    expect_openai_error(post(server.port(), c.path, dump_json(c.body)), 400, c.fragment);
  }
  const std::vector<Case> anthropic_cases = {
      {"/v1/messages", {{"messages", user}}, "`max_tokens` is required"},
      {"/v1/messages", {{"max_tokens", 8}}, "`messages` is required"},
      {"/v1/messages", {{"max_tokens", 8}, {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}},
       "messages[0].content[0].text"},
      {"/v1/messages", {{"max_tokens", 8}, {"messages", user}, {"system", 5}}, "system"},
      {"/v1/messages", {{"max_tokens", 8}, {"messages", user}, {"thinking", {{"type", "sometimes"}}}}, "thinking.type"},
      {"/v1/messages", {{"max_tokens", 8}, {"messages", user}, {"tool_choice", {{"type", "tool"}}}}, "tool_choice.name"},
      {"/v1/messages/count_tokens", {{"messages", 3}}, "messages"},
  };
  for (const Case& c : anthropic_cases) {
    SCOPED_TRACE(c.path + " " + dump_json(c.body));
    expect_anthropic_error(post(server.port(), c.path, dump_json(c.body)), 400, "invalid_request_error", c.fragment);
  }
  expect_alive(server.port());
}

TEST(ServerBadInput, UnknownFieldsAreIgnored) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  const Json body = {{"model", "whatever"},
                     {"messages", {{{"role", "user"}, {"content", "hi"}, {"extra_field", true}}}},
                     {"max_tokens", 2},
                     {"frobnicate", {{"x", {1, 2}}}},
                     {"user", "u-1"},
                     {"parallel_tool_calls", false}};
  EXPECT_EQ(post(server.port(), kChatPath, dump_json(body)).status, 200);
  const Json anthropic = {{"model", "claude-haiku-4-5"},
                          {"max_tokens", 2},
                          {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}, {"cache_control", {{"type", "ephemeral"}}}}}}}}},
                          {"context_management", {{"edits", Json::array()}}},
                          {"output_config", {{"effort", "low"}}},
                          {"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}};
  const HttpReply reply = post(server.port(), "/v1/messages?beta=true", dump_json(anthropic),
                               {{"anthropic-version", "2023-06-01"}, {"anthropic-beta", "a,b"}, {"x-app", "cli"}});
  EXPECT_EQ(reply.status, 200) << reply.body;
}

TEST(ServerBadInput, InvalidUtf8IsRefusedWithAClearMessage) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  const std::string body = std::string(R"({"messages":[{"role":"user","content":"bad )") + "\xff\xfe" + R"( bytes"}],"max_tokens":2})";
  const HttpReply reply = post(server.port(), kChatPath, body);
  expect_openai_error(reply, 400, "UTF-8");
  // The error body itself is valid JSON (the offending bytes are not echoed raw).
  EXPECT_FALSE(reply.json().is_null());
  expect_alive(server.port());
}

TEST(ServerBadInput, OversizeBodyGets413) {
  ServerOptions options;
  options.max_body_bytes = 64 * 1024;
  EngineServer server(options);
  ASSERT_TRUE(server.ok());
  const std::string huge = chat_body(std::string(200 * 1024, 'x'), 2);
  const HttpReply reply = post(server.port(), kChatPath, huge);
  EXPECT_EQ(reply.status, 413) << reply.body.substr(0, 300);
  if (reply.status == 413) expect_openai_error(reply, 413, "limit");
  const HttpReply anthropic = post(server.port(), "/v1/messages", huge);
  if (anthropic.status == 413) expect_anthropic_error(anthropic, 413, "request_too_large", "limit");
  expect_alive(server.port());
}

TEST(ServerRoutes, UnknownRoutesGet404InTheirShape) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  const HttpReply missing = get(server.port(), "/v2/nothing");
  expect_openai_error(missing, 404, "/v2/nothing");
  expect_anthropic_error(post(server.port(), "/v1/messages/nothing", "{}"), 404, "not_found_error", "/v1/messages/nothing");
  EXPECT_EQ(get(server.port(), kChatPath).status, 404);  // GET on a POST route
  EXPECT_EQ(get(server.port(), "/").status, 200);
  auto client = make_client(server.port());
  auto head = client->Head("/");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
}

TEST(ServerAuth, ApiKeyGuardsEveryRouteButHealth) {
  ServerOptions options;
  options.api_key = "sekret";
  EngineServer server(options);
  ASSERT_TRUE(server.ok());
  const std::string body = chat_body("hi", 2);
  expect_openai_error(post(server.port(), kChatPath, body), 401, "API key");
  expect_openai_error(post(server.port(), kChatPath, body, {{"Authorization", "Bearer wrong"}}), 401, "API key");
  EXPECT_EQ(post(server.port(), kChatPath, body, {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(post(server.port(), kChatPath, body, {{"x-api-key", "sekret"}}).status, 200);
  const std::string anthropic = R"({"max_tokens":2,"messages":[{"role":"user","content":"hi"}]})";
  expect_anthropic_error(post(server.port(), "/v1/messages", anthropic, {{"x-api-key", "nope"}}), 401, "authentication_error", "API key");
  EXPECT_EQ(post(server.port(), "/v1/messages", anthropic, {{"x-api-key", "sekret"}}).status, 200);
  EXPECT_EQ(get(server.port(), "/health").status, 200);
  EXPECT_EQ(get(server.port(), "/metrics").status, 401);
  EXPECT_EQ(get(server.port(), "/v1/models").status, 401);
  EXPECT_EQ(get(server.port(), "/v1/models", {{"Authorization", "Bearer sekret"}}).status, 200);
}

// After the only request's client walked away: the engine stops soon, long before max_tokens, and the server
// lives on.
void expect_cancelled_soon(EngineServer& server, int max_tokens) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  SchedulerStats stats;
  do {
    std::this_thread::sleep_for(20ms);
    stats = server.scheduler().stats();
  } while ((stats.running != 0 || stats.requests_completed == 0) && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(stats.running, 0u);
  EXPECT_EQ(stats.requests_completed, 1u);
  EXPECT_LT(stats.generated_tokens, static_cast<uint64_t>(max_tokens)) << "the generation was not cancelled";
  expect_alive(server.port());
}

TEST(ServerStreaming, ClientDisconnectCancelsTheGeneration) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  const int max_tokens = 1800;
  const Json body = {{"prompt", "def main():"}, {"max_tokens", max_tokens}, {"stream", true}, {"logit_bias", no_eos_bias()}};
  const int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  const std::string request = raw_request("/v1/completions", dump_json(body));
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  // Read until a few tokens have streamed, then walk away.
  std::string received;
  char buf[4096];
  while (received.find("data: ", received.find("data: ") + 1) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << received;
    received.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  expect_cancelled_soon(server, max_tokens);
}

// A reply answered in one piece writes nothing until the end: the server watches the connection
// (PeerWatch) and stops generating for a client that went away, as it does for a stream.
TEST(ServerNonStreamed, ClientDisconnectCancelsTheGeneration) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  const int max_tokens = 1800;
  const Json body = {{"prompt", "def main():"}, {"max_tokens", max_tokens}, {"logit_bias", no_eos_bias()}};
  const int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  const std::string request = raw_request("/v1/completions", dump_json(body));
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  // Walk away once the engine is decoding for it, without reading anything.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  SchedulerStats stats;
  do {
    std::this_thread::sleep_for(5ms);
    stats = server.scheduler().stats();
  } while (stats.decode_steps < 4 && std::chrono::steady_clock::now() < deadline);
  ASSERT_GE(stats.decode_steps, 4u) << "the request never started decoding";
  ASSERT_EQ(stats.requests_completed, 0u) << "the request ended before the client left: make it longer";
  ::close(fd);
  expect_cancelled_soon(server, max_tokens);
  // A client that stays gets its whole reply (the watch does not mistake a waiting client for a closed one).
  const HttpReply reply = post(server.port(), "/v1/completions",
                               dump_json(Json{{"prompt", "def main():"}, {"max_tokens", 64}, {"logit_bias", no_eos_bias()}}));
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.json()["usage"]["completion_tokens"], 64) << reply.body;
}

TEST(ServerStreaming, FiftyConcurrentStreamsEachGetTheirOwnTokens) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  constexpr int kClients = 50;
  auto prompt = [](int i) {
    return "# task " + std::to_string(i) + ": a function that returns " + std::to_string(i * 7 + 3) + "\ndef f" + std::to_string(i) + "(";
  };
  std::vector<StreamedChat> streamed(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      streamed[i] = stream_chat(server.port(), chat_body(prompt(i), 6, {{"stream", true}, {"seed", i}}));
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(streamed[i].status, 200) << streamed[i].text;
    if (streamed[i].status != 200) continue;
    EXPECT_TRUE(streamed[i].done) << "stream " << i << " did not end with [DONE]";
    EXPECT_FALSE(streamed[i].finish_reason.empty());
  }
  // Each stream's greedy text equals the same prompt's text fetched alone afterwards.
  for (int i = 0; i < kClients; ++i) {
    const HttpReply alone = post(server.port(), kChatPath, chat_body(prompt(i), 6));
    ASSERT_EQ(alone.status, 200) << alone.body;
    EXPECT_EQ(streamed[i].text, alone.json()["choices"][0]["message"]["content"].get<std::string>()) << "client " << i;
  }
  const SchedulerStats stats = server.scheduler().stats();
  EXPECT_EQ(stats.requests_completed, 2u * kClients);
  EXPECT_EQ(stats.requests_failed, 0u);
  EXPECT_EQ(get(server.port(), "/health").status, 200);
}

TEST(ServerStreaming, AFullQueueRefusesWith429) {
  SchedulerOptions scheduler_options;
  scheduler_options.max_batch = 1;  // one running, one waiting: the rest of a burst is refused
  scheduler_options.max_queued = 1;
  EngineServer server({}, scheduler_options);
  ASSERT_TRUE(server.ok());
  constexpr int kClients = 8;
  std::vector<HttpReply> replies(kClients);
  std::vector<std::thread> clients;
  std::latch start(kClients);  // all at once, so that the burst meets a busy engine even on a loaded machine
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const std::string body = chat_body("def g" + std::to_string(i) + "():", 400, {{"logit_bias", no_eos_bias()}});
      start.arrive_and_wait();
      replies[i] = post(server.port(), kChatPath, body);
    });
  }
  for (auto& t : clients) t.join();
  std::string statuses;
  for (const HttpReply& r : replies) statuses += std::to_string(r.status) + " ";
  SCOPED_TRACE("statuses: " + statuses);
  int ok = 0, refused = 0;
  for (const HttpReply& r : replies) {
    if (r.status == 200) {
      ++ok;
    } else {
      ++refused;
      expect_openai_error(r, 429, "queue is full");
      auto retry = r.headers.find("Retry-After");
      EXPECT_TRUE(retry != r.headers.end() && retry->second == "1");
    }
  }
  EXPECT_GE(ok, 1);  // the first; a second fits only if the engine took the first out of the queue in time
  EXPECT_GE(refused, 1);
  EXPECT_EQ(ok + refused, kClients);
  expect_alive(server.port());
}

TEST(ServerContext, APromptTooLongForTheContextGets400NamingTheSizes) {
  EngineServer server({}, {}, /*context=*/256);
  ASSERT_TRUE(server.ok());
  std::string long_text;
  for (int i = 0; i < 120; ++i) long_text += "value_" + std::to_string(i) + " = compute(" + std::to_string(i) + ")\n";
  const HttpReply reply = post(server.port(), kChatPath, chat_body(long_text, 4));
  expect_openai_error(reply, 400, "the context holds 256 tokens");
  EXPECT_EQ(reply.json()["error"].value("code", ""), "context_length_exceeded");
  // prompt + max_tokens over the context: refused, with the room that is left.
  const HttpReply over = post(server.port(), kChatPath, chat_body("def f():", 400));
  expect_openai_error(over, 400, "exceeds the context of 256 tokens");
  expect_anthropic_error(post(server.port(), "/v1/messages", R"({"max_tokens":400,"messages":[{"role":"user","content":"hi"}]})"),
                         400, "invalid_request_error", "256");
}

TEST(ServerContext, WithoutMaxTokensTheRoomLeftIsUsed) {
  EngineServer server({}, {}, /*context=*/256);
  ASSERT_TRUE(server.ok());
  const Json body = {{"prompt", "def main():"}, {"logit_bias", no_eos_bias()}, {"max_tokens", nullptr}};
  // /v1/completions defaults to 16 tokens (OpenAI's default); chat uses the room left.
  const HttpReply completion = post(server.port(), "/v1/completions", dump_json(body));
  ASSERT_EQ(completion.status, 200) << completion.body;
  EXPECT_EQ(completion.json()["usage"]["completion_tokens"], 16);
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"logit_bias", no_eos_bias()}};
  const HttpReply reply = post(server.port(), kChatPath, dump_json(chat));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json usage = reply.json()["usage"];
  EXPECT_EQ(usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>(), 256);
  EXPECT_EQ(reply.json()["choices"][0]["finish_reason"], "length");
}

TEST(ServerContext, ClampMaxTokensGeneratesToTheEndOfTheContext) {
  ServerOptions options;
  options.clamp_max_tokens = true;
  EngineServer server(options, {}, /*context=*/256);
  ASSERT_TRUE(server.ok());
  const HttpReply reply = post(server.port(), kChatPath, chat_body("hi", 32000, {{"logit_bias", no_eos_bias()}}));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json usage = reply.json()["usage"];
  EXPECT_EQ(usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>(), 256);
}

// The acceptance criterion for agents: a second turn that extends the first is served (>= 90% of its
// prompt) from the prompt cache, reported in usage, through each API.
TEST(ServerPromptCache, ASecondTurnIsServedFromTheCache) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  std::string context_text = "Here is the module we are working on:\n";
  for (int i = 0; i < 60; ++i)
    context_text += "def helper_" + std::to_string(i) + "(x):\n    return x * " + std::to_string(i) + " + 1\n\n";
  const Json first_messages = {{{"role", "system"}, {"content", "You are a coding assistant."}},
                               {{"role", "user"}, {"content", context_text + "Explain helper_3."}}};
  const HttpReply first = post(server.port(), kChatPath,
                               dump_json({{"messages", first_messages}, {"max_tokens", 8}, {"temperature", 0}}));
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string answer = first.json()["choices"][0]["message"]["content"].get<std::string>();
  Json second_messages = first_messages;
  second_messages.push_back({{"role", "assistant"}, {"content", answer}});
  second_messages.push_back({{"role", "user"}, {"content", "Now explain helper_4."}});
  const HttpReply second = post(server.port(), kChatPath,
                                dump_json({{"messages", second_messages}, {"max_tokens", 8}, {"temperature", 0}}));
  ASSERT_EQ(second.status, 200) << second.body;
  const Json usage = second.json()["usage"];
  const int prompt = usage["prompt_tokens"].get<int>();
  const int cached = usage["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(prompt, 500);
  EXPECT_GE(cached * 10, prompt * 9) << "cached " << cached << " of " << prompt;

  // The same through the Responses API (Codex re-sends the whole history each turn).
  const Json input = {{{"role", "user"}, {"content", context_text + "Explain helper_5."}}};
  const HttpReply r1 = post(server.port(), "/v1/responses",
                            dump_json({{"instructions", "You are terse."}, {"input", input}, {"max_output_tokens", 8}, {"temperature", 0}}));
  ASSERT_EQ(r1.status, 200) << r1.body;
  Json input2 = input;
  input2.push_back({{"type", "message"}, {"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", r1.json()["output"][0]["content"][0]["text"]}}}}});
  input2.push_back({{"role", "user"}, {"content", "And helper_6?"}});
  const HttpReply r2 = post(server.port(), "/v1/responses",
                            dump_json({{"instructions", "You are terse."}, {"input", input2}, {"max_output_tokens", 8}, {"temperature", 0}}));
  ASSERT_EQ(r2.status, 200) << r2.body;
  const Json u2 = r2.json()["usage"];
  EXPECT_GE(u2["input_tokens_details"]["cached_tokens"].get<int>() * 10, u2["input_tokens"].get<int>() * 9) << u2.dump();
}

TEST(ServerObservability, OneJsonLogLinePerRequest) {
  const std::string path = (std::filesystem::temp_directory_path() / ("helium_server_log_" + std::to_string(::getpid()) + ".jsonl")).string();
  FILE* log = std::fopen(path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  {
    ServerOptions options;
    options.log = log;
    EngineServer server(options);
    ASSERT_TRUE(server.ok());
    EXPECT_EQ(post(server.port(), kChatPath, chat_body("def f():", 3)).status, 200);
    const StreamedChat s = stream_chat(server.port(), chat_body("def g():", 3, {{"stream", true}}));
    EXPECT_TRUE(s.done);
    EXPECT_EQ(post(server.port(), kChatPath, "{").status, 400);
    EXPECT_EQ(get(server.port(), "/nothing").status, 404);
  }
  std::fclose(log);
  std::ifstream in(path);
  std::vector<Json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
  std::filesystem::remove(path);
  ASSERT_EQ(lines.size(), 4u);
  // A stream's line is written when it ends, which may be after the next request's: order by status.
  std::stable_sort(lines.begin(), lines.end(), [](const Json& a, const Json& b) {
    return std::make_pair(a["status"].get<int>(), a.value("stream", false)) < std::make_pair(b["status"].get<int>(), b.value("stream", false));
  });
  for (int i = 0; i < 2; ++i) {
    const Json& l = lines[i];
    EXPECT_EQ(l["method"], "POST");
    EXPECT_EQ(l["path"], kChatPath);
    EXPECT_EQ(l["status"], 200);
    EXPECT_EQ(l["stream"], i == 1);
    EXPECT_GT(l["prompt_tokens"].get<int>(), 0);
    EXPECT_TRUE(l["cached_tokens"].is_number());
    EXPECT_EQ(l["generated_tokens"], 3);
    EXPECT_TRUE(l["ms"].is_number());
    EXPECT_EQ(l["finish_reason"], "length");
  }
  EXPECT_EQ(lines[2]["status"], 400);
  EXPECT_TRUE(lines[2]["error"].is_string());
  EXPECT_EQ(lines[3]["status"], 404);
}

TEST(ServerObservability, MetricsHealthAndModels) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  ASSERT_EQ(post(server.port(), kChatPath, chat_body("def f():", 3)).status, 200);
  const HttpReply metrics = get(server.port(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  for (const char* expected : {"helium_requests_total{outcome=\"completed\"} 1\n", "helium_generated_tokens_total 3\n",
                               "# TYPE helium_prompt_tokens_total counter", "helium_prompt_cached_tokens_total ",
                               "helium_queue_depth 0\n", "helium_requests_running 0\n", "helium_generation_tokens_per_second ",
                               "helium_prefill_seconds_total ", "helium_http_responses_total{code=\"200\"} 1\n"})
    EXPECT_NE(metrics.body.find(expected), std::string::npos) << "missing " << expected << " in\n" << metrics.body;

  const Json health = get(server.port(), "/health").json();
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["model"], "helium-code-12m");
  EXPECT_EQ(health["context"], 2048);

  const Json openai = get(server.port(), "/v1/models").json();
  EXPECT_EQ(openai["object"], "list");
  EXPECT_EQ(openai["data"][0]["id"], "helium-code-12m");
  EXPECT_EQ(openai["models"][0]["slug"], "helium-code-12m");
  const Json anthropic = get(server.port(), "/v1/models?limit=1000", {{"anthropic-version", "2023-06-01"}}).json();
  EXPECT_EQ(anthropic["data"][0]["type"], "model");
  EXPECT_EQ(anthropic["has_more"], false);
  EXPECT_EQ(anthropic["first_id"], "helium-code-12m");
}

TEST(ServerShutdown, StopEndsStreamsAndRefusesNewRequests) {
  EngineServer server;
  ASSERT_TRUE(server.ok());
  const Json body = {{"prompt", "def main():"}, {"max_tokens", 1800}, {"stream", true}, {"logit_bias", no_eos_bias()}};
  const int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  const std::string request = raw_request("/v1/completions", dump_json(body));
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::string received;
  char buf[4096];
  while (received.find("data: ") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    received.append(buf, static_cast<size_t>(n));
  }
  const auto t0 = std::chrono::steady_clock::now();
  server.http().stop();  // returns at once; the listener closes and the generation is cancelled
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) received.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server.scheduler().stats().running != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.scheduler().stats().running, 0u);
  EXPECT_LT(server.scheduler().stats().generated_tokens, 1800u);
  EXPECT_EQ(post(server.port(), kChatPath, chat_body("hi", 2)).status, 0) << "the listener should be closed";
}

}  // namespace
}  // namespace helium::server::testing
