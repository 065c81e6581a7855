// tests/launch/agents_test.cpp — each agent's plan for an endpoint (what it is told: URL, key, model,
// window), the merge into pi's models.json (other providers kept; a file that does not parse is refused
// and left as it was), the printed plan (key hidden, shell quoting), and the process side: PATH lookup,
// file writes, running an agent with its environment, its exit code, and SIGTERM passed on to it.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "launch/agents.h"
#include "launch/process.h"

namespace helium::launch {
namespace {

namespace fs = std::filesystem;

Endpoint test_endpoint() { return {"http://127.0.0.1:4321", "k3y-secret", "qwen3-8b", 32768}; }

LaunchEnvironment test_environment(const fs::path& root) {
  LaunchEnvironment env;
  env.home = root;
  env.cache_dir = root / "cache" / "helium";
  env.pi_agent_dir = root / "pi";
  return env;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("helium_launch_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string env_value(const LaunchPlan& plan, const std::string& name) {
  for (const auto& [n, v] : plan.env)
    if (n == name) return v;
  return "<unset>";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(LaunchPlans, ClaudeIsToldTheEndpointEveryTierAndTheWindow) {
  auto plan = plan_launch(Agent::kClaude, test_endpoint(), {"-p", "hi"}, test_environment(fresh_dir("claude")));
  ASSERT_TRUE(plan.is_ok()) << plan.error_message();
  EXPECT_EQ(plan->argv, (std::vector<std::string>{"claude", "--model", "qwen3-8b", "-p", "hi"}));
  EXPECT_EQ(env_value(*plan, "ANTHROPIC_BASE_URL"), "http://127.0.0.1:4321");  // Claude appends /v1/messages
  EXPECT_EQ(env_value(*plan, "ANTHROPIC_AUTH_TOKEN"), "k3y-secret");
  EXPECT_EQ(env_value(*plan, "ANTHROPIC_API_KEY"), "");
  for (const char* tier : {"ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                           "ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"})
    EXPECT_EQ(env_value(*plan, tier), "qwen3-8b") << tier;
  EXPECT_EQ(env_value(*plan, "CLAUDE_CODE_MAX_CONTEXT_TOKENS"), "32768");
  EXPECT_EQ(env_value(*plan, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"), "8192");
  EXPECT_EQ(env_value(*plan, "CLAUDE_CODE_ATTRIBUTION_HEADER"), "0");
  EXPECT_TRUE(plan->files.empty());
}

TEST(LaunchPlans, CodexGetsAProviderOfItsOwnAndACatalogEntry) {
  const fs::path root = fresh_dir("codex");
  auto plan = plan_launch(Agent::kCodex, test_endpoint(), {"exec", "hi"}, test_environment(root));
  ASSERT_TRUE(plan.is_ok()) << plan.error_message();
  const std::vector<std::string>& a = plan->argv;
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a.front(), "codex");
  EXPECT_EQ(std::vector<std::string>(a.end() - 2, a.end()), (std::vector<std::string>{"exec", "hi"}));
  auto has_override = [&](const std::string& o) {
    for (size_t i = 1; i + 1 < a.size(); ++i)
      if (a[i] == "-c" && a[i + 1] == o) return true;
    return false;
  };
  EXPECT_TRUE(has_override(R"(model_provider="helium")"));
  EXPECT_TRUE(has_override(R"(model_providers.helium.base_url="http://127.0.0.1:4321/v1")"));
  EXPECT_TRUE(has_override(R"(model_providers.helium.wire_api="responses")"));
  EXPECT_TRUE(has_override(R"(model_providers.helium.env_key="HELIUM_CODEX_API_KEY")"));
  EXPECT_TRUE(has_override(R"(model="qwen3-8b")"));
  EXPECT_TRUE(has_override("model_context_window=32768"));
  EXPECT_EQ(env_value(*plan, "HELIUM_CODEX_API_KEY"), "k3y-secret");
  ASSERT_EQ(plan->files.size(), 1u);
  EXPECT_EQ(plan->files[0].path, root / "cache" / "helium" / "codex" / "qwen3-8b.json");
  EXPECT_TRUE(has_override("model_catalog_json=" + nlohmann::json(plan->files[0].path.string()).dump()));
  const auto catalog = nlohmann::json::parse(plan->files[0].content);
  EXPECT_EQ(catalog["models"][0]["slug"], "qwen3-8b");
  EXPECT_EQ(catalog["models"][0]["context_window"], 32768);
  EXPECT_EQ(plan->files[0].content.find("k3y-secret"), std::string::npos);  // the key is never written
}

TEST(LaunchPlans, TomlStringsSurviveQuotesInTheModelName) {
  Endpoint e = test_endpoint();
  e.model = "org/odd \"name\"\\v1";
  auto plan = plan_launch(Agent::kCodex, e, {}, test_environment(fresh_dir("codex_quotes")));
  ASSERT_TRUE(plan.is_ok());
  bool found = false;
  for (const std::string& arg : plan->argv) found = found || arg == R"(model="org/odd \"name\"\\v1")";
  EXPECT_TRUE(found);
  EXPECT_EQ(plan->files[0].path.filename(), "org_odd__name__v1.json");
}

TEST(LaunchPlans, OpenCodeConfigNamesTheModelWithItsLimits) {
  auto plan = plan_launch(Agent::kOpenCode, test_endpoint(), {"run", "hi"}, test_environment(fresh_dir("opencode")));
  ASSERT_TRUE(plan.is_ok()) << plan.error_message();
  EXPECT_EQ(plan->argv, (std::vector<std::string>{"opencode", "run", "hi"}));
  const auto config = nlohmann::json::parse(env_value(*plan, "OPENCODE_CONFIG_CONTENT"));
  EXPECT_EQ(config["model"], "helium/qwen3-8b");
  EXPECT_EQ(config["small_model"], "helium/qwen3-8b");
  const auto& provider = config["provider"]["helium"];
  EXPECT_EQ(provider["npm"], "@ai-sdk/openai-compatible");
  EXPECT_EQ(provider["options"]["baseURL"], "http://127.0.0.1:4321/v1");
  EXPECT_EQ(provider["options"]["apiKey"], "k3y-secret");
  EXPECT_EQ(provider["models"]["qwen3-8b"]["limit"]["context"], 32768);
  EXPECT_EQ(provider["models"]["qwen3-8b"]["limit"]["output"], 8192);
}

TEST(LaunchPlans, PiProviderIsMergedIntoTheUsersModelsFile) {
  const fs::path root = fresh_dir("pi_merge");
  fs::create_directories(root / "pi");
  std::ofstream(root / "pi" / "models.json") << R"({"providers": {"mine": {"baseUrl": "http://x/v1", "api": "openai-completions",
    "apiKey": "MY_KEY", "models": [{"id": "m"}]}, "helium": {"baseUrl": "http://old/v1"}}, "extra": [1, 2]})";
  auto plan = plan_launch(Agent::kPi, test_endpoint(), {"-p", "hi"}, test_environment(root));
  ASSERT_TRUE(plan.is_ok()) << plan.error_message();
  EXPECT_EQ(plan->argv, (std::vector<std::string>{"pi", "--provider", "helium", "--model", "qwen3-8b", "-p", "hi"}));
  ASSERT_EQ(plan->files.size(), 1u);
  EXPECT_EQ(plan->files[0].path, root / "pi" / "models.json");
  const auto merged = nlohmann::json::parse(plan->files[0].content);
  EXPECT_EQ(merged["providers"]["mine"]["apiKey"], "MY_KEY");  // the user's provider is kept
  EXPECT_EQ(merged["extra"], nlohmann::json::array({1, 2}));
  const auto& helium = merged["providers"]["helium"];
  EXPECT_EQ(helium["baseUrl"], "http://127.0.0.1:4321/v1");  // the old entry is replaced
  EXPECT_EQ(helium["apiKey"], "HELIUM_PI_API_KEY");           // a variable's name, not the key
  EXPECT_EQ(helium["models"][0]["contextWindow"], 32768);
  EXPECT_EQ(env_value(*plan, "HELIUM_PI_API_KEY"), "k3y-secret");
  EXPECT_EQ(plan->files[0].content.find("k3y-secret"), std::string::npos);
}

TEST(LaunchPlans, PiModelsFileThatDoesNotParseIsRefusedAndKept) {
  const fs::path root = fresh_dir("pi_bad");
  fs::create_directories(root / "pi");
  const std::string broken = R"({"providers": {"mine": )";
  std::ofstream(root / "pi" / "models.json") << broken;
  auto plan = plan_launch(Agent::kPi, test_endpoint(), {}, test_environment(root));
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.error_message().find("models.json: is not valid JSON"), std::string::npos) << plan.error_message();
  EXPECT_EQ(read_text(root / "pi" / "models.json"), broken);

  std::ofstream(root / "pi" / "models.json") << R"({"providers": []})";
  auto wrong_shape = plan_launch(Agent::kPi, test_endpoint(), {}, test_environment(root));
  ASSERT_FALSE(wrong_shape.is_ok());
  EXPECT_NE(wrong_shape.error_message().find("`providers` must be an object"), std::string::npos);

  // No file, or an empty one: a new file.
  fs::remove(root / "pi" / "models.json");
  EXPECT_TRUE(plan_launch(Agent::kPi, test_endpoint(), {}, test_environment(root)).is_ok());
}

TEST(LaunchPlans, EndpointWithoutModelOrWindowIsRefused) {
  Endpoint e = test_endpoint();
  e.context_tokens = 0;
  EXPECT_FALSE(plan_launch(Agent::kClaude, e, {}, test_environment(fresh_dir("refused"))).is_ok());
  e = test_endpoint();
  e.model.clear();
  EXPECT_FALSE(plan_launch(Agent::kOpenCode, e, {}, test_environment(fresh_dir("refused"))).is_ok());
}

TEST(LaunchPlans, OutputCeilingIsAQuarterOfTheContextWithinBounds) {
  EXPECT_EQ(agent_max_output_tokens(2048), 1024);
  EXPECT_EQ(agent_max_output_tokens(32768), 8192);
  EXPECT_EQ(agent_max_output_tokens(262144), 32000);
}

TEST(LaunchPlans, PrintedPlanHidesTheKeyAndQuotesForAShell) {
  auto plan = plan_launch(Agent::kOpenCode, test_endpoint(), {"run", "it's done"}, test_environment(fresh_dir("print")));
  ASSERT_TRUE(plan.is_ok());
  const std::string text = describe_plan(*plan);
  EXPECT_EQ(text.find("k3y-secret"), std::string::npos) << text;
  EXPECT_NE(text.find("<hidden>"), std::string::npos);
  EXPECT_NE(text.find("opencode run 'it'\\''s done'\n"), std::string::npos) << text;
  EXPECT_EQ(shell_quote("plain-word_1.2/x"), "plain-word_1.2/x");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
}

TEST(LaunchProcess, FindsExecutablesOnThePath) {
  const fs::path dir = fresh_dir("path");
  const fs::path tool = dir / "agent-x";
  std::ofstream(tool) << "#!/bin/sh\n";
  fs::permissions(tool, fs::perms::owner_all);
  std::ofstream(dir / "not-executable") << "x";
  auto found = find_executable("agent-x", "/nonexistent:" + dir.string());
  ASSERT_TRUE(found.is_ok()) << found.error_message();
  EXPECT_EQ(found.value(), tool);
  auto missing = find_executable("not-executable", dir.string());
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.error_message(), "not-executable was not found on PATH");
  EXPECT_TRUE(find_executable(tool.string(), "").is_ok());  // a path is taken as it is
}

TEST(LaunchProcess, WritesFilesWholeKeepingTheirMode) {
  const fs::path dir = fresh_dir("write");
  const fs::path existing = dir / "models.json";
  std::ofstream(existing) << "old";
  ::chmod(existing.c_str(), 0600);
  LaunchPlan plan;
  plan.files = {{existing, "new content\n"}, {dir / "a" / "b" / "c.json", "{}\n"}};
  ASSERT_TRUE(write_plan_files(plan).is_ok());
  EXPECT_EQ(read_text(existing), "new content\n");
  EXPECT_EQ(read_text(dir / "a" / "b" / "c.json"), "{}\n");
  struct stat st {};
  ASSERT_EQ(::stat(existing.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const auto& entry : fs::directory_iterator(dir))  // no temporary left behind
    EXPECT_EQ(entry.path().string().find(".helium-"), std::string::npos) << entry.path();
}

TEST(LaunchProcess, RunsTheAgentWithItsEnvironmentAndReturnsItsExitCode) {
  const fs::path dir = fresh_dir("run");
  LaunchPlan plan;
  plan.argv = {"sh", "-c", "printf '%s|%s' \"$HELIUM_TEST_VALUE\" \"$1\" > " + (dir / "out").string() + "; exit 7",
               "sh", "arg one"};
  plan.env = {{"HELIUM_TEST_VALUE", "a value"}};
  auto code = run_in_foreground("/bin/sh", plan);
  ASSERT_TRUE(code.is_ok()) << code.error_message();
  EXPECT_EQ(code.value(), 7);
  EXPECT_EQ(read_text(dir / "out"), "a value|arg one");

  auto cannot = run_in_foreground(dir / "missing-binary", plan);
  ASSERT_FALSE(cannot.is_ok());
  EXPECT_NE(cannot.error_message().find("cannot be started"), std::string::npos);
}

TEST(LaunchProcess, TerminationIsPassedOnToTheAgent) {
  LaunchPlan plan;
  plan.argv = {"sleep", "30"};
  // SIGTERM sent to this process (as a service manager would) while the agent runs.
  std::thread terminator([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGTERM);
  });
  const auto start = std::chrono::steady_clock::now();
  auto code = run_in_foreground("/bin/sleep", plan);
  terminator.join();
  ASSERT_TRUE(code.is_ok()) << code.error_message();
  EXPECT_EQ(code.value(), 128 + SIGTERM);  // the agent ended by the signal; this process still runs
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Afterwards SIGTERM's disposition is the default again.
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(LaunchProcess, InterruptsFromTheTerminalAreTheAgents) {
  // A Ctrl-C reaches the whole foreground process group: helium must outlive it and let the agent decide.
  LaunchPlan plan;
  plan.argv = {"sh", "-c", "trap 'exit 42' INT; kill -INT $PPID; kill -INT $$; sleep 5; exit 1"};
  auto code = run_in_foreground("/bin/sh", plan);
  ASSERT_TRUE(code.is_ok()) << code.error_message();
  EXPECT_EQ(code.value(), 42);  // the agent's own handler ran; helium, interrupted too, waited for it
}

TEST(LaunchProcess, RandomKeysAreFreshHex) {
  const std::string a = random_api_key(), b = random_api_key();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace helium::launch
