// tests/server/sdk_clients_test.cpp — the official SDKs (npm `openai`, `@anthropic-ai/sdk`, run under
// node from build/npm-tools) against the server: on the real engine with the embedded default model
// (text answers; greedy requests streamed and not must agree), and on a scripted engine with the Qwen3
// tokenizer and template, whose fixed outputs carry tool calls, reasoning and stop strings through the
// real parsers and stream writers. The scripts in tools/server check every shape and exit non-zero on a
// mismatch; the tests check their exit codes.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>

#include "server_fixture.h"
#include "tokenizer/tokenizer.h"

namespace helium::server::testing {
namespace {

void expect_script_passes(const std::string& script, const std::string& url, const std::string& model) {
  std::string output;
  const int code = run_node_script(script, {url, model}, output);
  EXPECT_EQ(code, 0) << script << " failed:\n" << output;
  EXPECT_NE(output.find("all checks passed"), std::string::npos) << output;
}

// The scripted engine's outputs, by the name after the last "SCRIPT:" in the prompt (Qwen3 formats).
std::string scripted_output(const std::string& prompt) {
  const size_t at = prompt.rfind("SCRIPT:");
  if (at == std::string::npos) return "Hello from the script.";
  std::string name;
  for (size_t i = at + 7; i < prompt.size() && (std::isalnum(static_cast<unsigned char>(prompt[i])) || prompt[i] == '_'); ++i)
    name += prompt[i];
  const std::string weather_call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  if (name == "weather") return "<think>\nThe user wants the weather.\n</think>\n\n" + weather_call;
  if (name == "two_calls")
    return weather_call + "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  if (name == "namespaced")
    return "<tool_call>\n{\"name\": \"mcp__files__read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>";
  if (name == "custom")
    return "<tool_call>\n{\"name\": \"apply_patch\", \"arguments\": {\"input\": \"*** Begin Patch\\n*** End Patch\"}}\n</tool_call>";
  if (name == "empty_args") return "<tool_call>\n{\"name\": \"list_files\", \"arguments\": {}}\n</tool_call>";
  if (name == "stop") return "one two\nSTOP three";
  if (name == "think_text") return "<think>\nPondering.\n</think>\n\nThe answer is 4.";
  return "Hello from the script.";
}

TEST(ServerSdkClients, OpenAISdkOnTheDefaultModel) {
  if (auto available = node_sdks_available(); !available) GTEST_SKIP() << available.message();
  EngineServer server;
  ASSERT_TRUE(server.ok());
  expect_script_passes("openai_sdk.mjs", server.url(), "helium-code-12m");
}

TEST(ServerSdkClients, AnthropicSdkOnTheDefaultModel) {
  if (auto available = node_sdks_available(); !available) GTEST_SKIP() << available.message();
  EngineServer server;
  ASSERT_TRUE(server.ok());
  expect_script_passes("anthropic_sdk.mjs", server.url(), "helium-code-12m");
}

TEST(ServerSdkClients, ToolCallsAndReasoningOnAScriptedEngine) {
  if (auto available = node_sdks_available(); !available) GTEST_SKIP() << available.message();
  if (!std::filesystem::exists(qwen3_tokenizer_dir() + "/tokenizer.json"))
    GTEST_SKIP() << "the Qwen3 tokenizer is missing (" << qwen3_tokenizer_dir() << "); run scripts/install-deps";
  auto tokenizer = Tokenizer::from_dir(qwen3_tokenizer_dir());
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.error_message();
  ServedModel model;
  model.id = "scripted-qwen3";
  model.tokenizer = tokenizer.value();
  model.chat_template = tokenizer.value()->chat_template();
  model.model_type = "qwen3";
  model.context = 32768;
  ASSERT_FALSE(model.chat_template.empty());
  ScriptedQueue queue(model.tokenizer, scripted_output);
  ServerOptions options;
  options.log = nullptr;
  RunningServer server;
  server.start(model, queue, options);
  ASSERT_TRUE(server.http().chat_template_error().empty()) << server.http().chat_template_error();
  expect_script_passes("sdk_tools.mjs", server.url(), model.id);
}

}  // namespace
}  // namespace helium::server::testing
