// tests/launch/agents_e2e_test.cpp — `helium claude|codex|opencode|pi` with the real agents (pinned npm
// packages that scripts/install-deps puts in build/npm-agents), each run headless by the real `helium`
// binary against a scripted server (--url): the scripted model answers the agent's prompt with a call
// of the agent's own file-writing tool, then, once the tool's result is in the prompt, with a closing
// line; the test checks that the agent wrote the file, printed the closing line and exited 0. A stand-in
// agent (a node script on PATH) checks what a launch without --url does: the server it starts, its key,
// its log, and the agent's exit code passed through.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../server/server_fixture.h"
#include "tokenizer/tokenizer.h"

namespace helium::server::testing {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMarker = "SCRIPT-E2E";
constexpr std::string_view kClosing = "All done: hello.txt is written.";

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  q += "'";
  return q;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path agents_bin() { return fs::path(HELIUM_NPM_AGENTS) / "node_modules" / ".bin"; }

// The scripted model: a tool call for the agent's prompt, the closing line once a tool result follows it,
// and a short answer to anything else (titles, warm-ups).
std::string agent_script(const std::string& prompt, const std::string& tool_call) {
  const size_t marker = prompt.rfind(kMarker);
  if (marker == std::string::npos) return "OK.";
  const size_t result = prompt.rfind("<tool_response>");
  if (result != std::string::npos && result > marker) return std::string(kClosing);
  std::string call = "<tool_call>\n";
  call += tool_call;
  call += "\n</tool_call>";
  return call;
}

struct AgentRun {
  int code = -1;
  std::string out, err;
};

// Runs `helium <agent> <helium_args> -- <agent_args>` in `work`, with a home of its own.
AgentRun run_helium(const std::string& agent, const std::vector<std::string>& helium_args,
               const std::vector<std::string>& agent_args, const fs::path& work, const fs::path& bin_dir,
               const std::string& extra_env = "") {
  const fs::path home = work / "home";
  fs::create_directories(home);
  std::string command = "cd " + quote(work.string()) + " && env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY -u HELIUM_CACHE_DIR HOME=" +
                        quote(home.string()) + " XDG_CONFIG_HOME=" + quote((home / ".config").string()) +
                        " XDG_DATA_HOME=" + quote((home / ".local/share").string()) +
                        " XDG_STATE_HOME=" + quote((home / ".local/state").string()) +
                        " XDG_CACHE_HOME=" + quote((home / ".cache").string()) + " PATH=" +
                        quote(bin_dir.string()) + ":\"$PATH\" " + extra_env + " timeout 300 " + quote(HELIUM_BINARY) +
                        " " + agent;
  for (const std::string& a : helium_args) command.append(" ").append(quote(a));
  command += " --";
  for (const std::string& a : agent_args) command.append(" ").append(quote(a));
  command += " < /dev/null > " + quote((work / "out.txt").string()) + " 2> " + quote((work / "err.txt").string());
  const int status = std::system(command.c_str());
  AgentRun run;
  run.code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text(work / "out.txt");
  run.err = read_text(work / "err.txt");
  return run;
}

fs::path fresh_work_dir(const std::string& name) {
  const fs::path dir = fs::path(HELIUM_TEST_WORK_DIR) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A scripted Qwen3 server whose model calls `tool_call` for the agent.
class ScriptedAgentServer {
 public:
  explicit ScriptedAgentServer(const std::string& tool_call) {
    auto tokenizer = Tokenizer::from_dir(qwen3_tokenizer_dir());
    EXPECT_TRUE(tokenizer.is_ok()) << tokenizer.error_message();
    if (!tokenizer.is_ok()) return;
    ServedModel model;
    model.id = "scripted-qwen3";
    model.tokenizer = tokenizer.value();
    model.chat_template = tokenizer.value()->chat_template();
    model.model_type = "qwen3";
    model.context = 131072;  // Claude Code's prompt alone is ~20K tokens
    queue_ = std::make_unique<ScriptedQueue>(model.tokenizer,
                                             [tool_call](const std::string& prompt) { return agent_script(prompt, tool_call); });
    ServerOptions options;
    options.log = nullptr;
    options.api_key = "e2e-key";
    options.clamp_max_tokens = true;
    server_.start(model, *queue_, options);
  }
  std::string url() const { return server_.url(); }

 private:
  std::unique_ptr<ScriptedQueue> queue_;
  RunningServer server_;
};

::testing::AssertionResult agent_installed(const std::string& binary) {
  if (!fs::exists(agents_bin() / binary))
    return ::testing::AssertionFailure() << binary << " is not installed in " << agents_bin()
                                         << "; run scripts/install-deps (it installs the four agents there)";
  if (!fs::exists(qwen3_tokenizer_dir() + "/tokenizer.json"))
    return ::testing::AssertionFailure() << "the Qwen3 tokenizer is missing; run scripts/install-deps";
  return ::testing::AssertionSuccess();
}

void expect_agent_wrote_the_file(const AgentRun& run, const fs::path& work, const std::string& content) {
  EXPECT_EQ(run.code, 0) << "stdout:\n" << run.out << "\nstderr:\n" << run.err;
  EXPECT_EQ(read_text(work / "hello.txt"), content) << "stdout:\n" << run.out << "\nstderr:\n" << run.err;
  EXPECT_NE(run.out.find(kClosing), std::string::npos) << "stdout:\n" << run.out << "\nstderr:\n" << run.err;
}

std::string prompt() { return std::string(kMarker) + ": write hello.txt"; }

TEST(AgentLaunch, ClaudeCodeWritesAFileThroughTheServer) {
  if (auto ok = agent_installed("claude"); !ok) GTEST_SKIP() << ok.message();
  const fs::path work = fresh_work_dir("claude");
  ScriptedAgentServer server(R"({"name": "Write", "arguments": {"file_path": ")" + (work / "hello.txt").string() +
                             R"(", "content": "hello from claude"}})");
  const AgentRun run = run_helium("claude", {"--url", server.url(), "--api-key", "e2e-key"},
                             {"-p", prompt(), "--allowedTools", "Write", "--max-turns", "4"}, work, agents_bin(),
                             "DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1");
  expect_agent_wrote_the_file(run, work, "hello from claude");
}

TEST(AgentLaunch, CodexWritesAFileThroughTheServer) {
  if (auto ok = agent_installed("codex"); !ok) GTEST_SKIP() << ok.message();
  const fs::path work = fresh_work_dir("codex");
  ScriptedAgentServer server(R"({"name": "exec_command", "arguments": {"cmd": "printf 'hello from codex' > hello.txt"}})");
  const AgentRun run = run_helium("codex", {"--url", server.url(), "--api-key", "e2e-key"},
                             {"-c", "check_for_update_on_startup=false", "exec", "--skip-git-repo-check",
                              "--dangerously-bypass-approvals-and-sandbox", prompt()},
                             work, agents_bin());
  expect_agent_wrote_the_file(run, work, "hello from codex");
}

TEST(AgentLaunch, OpenCodeWritesAFileThroughTheServer) {
  if (auto ok = agent_installed("opencode"); !ok) GTEST_SKIP() << ok.message();
  const fs::path work = fresh_work_dir("opencode");
  ScriptedAgentServer server(R"({"name": "write", "arguments": {"filePath": ")" + (work / "hello.txt").string() +
                             R"(", "content": "hello from opencode"}})");
  const AgentRun run = run_helium("opencode", {"--url", server.url(), "--api-key", "e2e-key"}, {"run", prompt()}, work,
                             agents_bin(), "OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1");
  expect_agent_wrote_the_file(run, work, "hello from opencode");
}

TEST(AgentLaunch, PiWritesAFileThroughTheServer) {
  if (auto ok = agent_installed("pi"); !ok) GTEST_SKIP() << ok.message();
  const fs::path work = fresh_work_dir("pi");
  ScriptedAgentServer server(R"({"name": "write", "arguments": {"path": "hello.txt", "content": "hello from pi"}})");
  const AgentRun run = run_helium("pi", {"--url", server.url(), "--api-key", "e2e-key"}, {"-p", "--no-session", prompt()},
                             work, agents_bin(), "PI_OFFLINE=1");
  expect_agent_wrote_the_file(run, work, "hello from pi");
}

// --url against a server that cannot serve the launch: each refusal names the cause (launch::query_server).
TEST(AgentLaunch, UrlServersThatCannotServeTheLaunchAreClearErrors) {
  if (auto ok = agent_installed("pi"); !ok) GTEST_SKIP() << ok.message();
  ScriptedAgentServer server("{}");
  const fs::path work = fresh_work_dir("url_errors");
  auto refusal = [&](const std::vector<std::string>& args) {
    std::vector<std::string> all = args;
    all.push_back("--dry-run");
    const AgentRun run = run_helium("pi", all, {}, work, agents_bin());
    EXPECT_EQ(run.code, 1) << run.out;
    return run.err;
  };
  EXPECT_NE(refusal({"--url", server.url()}).find("wants an API key: give it with --api-key or HELIUM_API_KEY"),
            std::string::npos);
  EXPECT_NE(refusal({"--url", server.url(), "--api-key", "e2e-key", "-m", "other"})
                .find("does not serve \"other\"; it serves: scripted-qwen3"),
            std::string::npos);
  EXPECT_NE(refusal({"--url", "https://example.invalid"}).find("--url must start with http://"), std::string::npos);
  EXPECT_NE(refusal({"--url", "http://127.0.0.1:1"}).find("http://127.0.0.1:1/v1/models cannot be reached"), std::string::npos);
  // The model and its context come from the server's list; a /v1 suffix is accepted.
  const AgentRun ok = run_helium("pi", {"--url", server.url() + "/v1/", "--api-key", "e2e-key", "--dry-run"}, {}, work,
                                 agents_bin());
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("# pi against scripted-qwen3 at " + server.url() + " (context 131072 tokens)"), std::string::npos)
      << ok.out;
}

// A stand-in `claude` on PATH: reports what helium told it and what the server it started answered,
// then exits 3.
constexpr const char* kStandInClaude = R"(#!/usr/bin/env node
const base = process.env.ANTHROPIC_BASE_URL, token = process.env.ANTHROPIC_AUTH_TOKEN;
(async () => {
  const withoutKey = await fetch(base + '/v1/models');
  const reply = await fetch(base + '/v1/messages', {method: 'POST',
    headers: {'content-type': 'application/json', authorization: 'Bearer ' + token},
    body: JSON.stringify({model: process.env.ANTHROPIC_MODEL, max_tokens: 4, messages: [{role: 'user', content: 'hi'}]})});
  const body = await reply.json();
  console.log(JSON.stringify({args: process.argv.slice(2), without_key: withoutKey.status, status: reply.status,
    type: body.type, model: process.env.ANTHROPIC_MODEL, window: process.env.CLAUDE_CODE_MAX_CONTEXT_TOKENS,
    token_length: (token || '').length}));
  process.exit(3);
})();
)";

TEST(AgentLaunch, ServesTheModelOnAPrivateKeyAndPassesTheAgentsExitCode) {
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not on PATH";
  const fs::path work = fresh_work_dir("stand_in");
  const fs::path bin = work / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "claude") << kStandInClaude;
  fs::permissions(bin / "claude", fs::perms::owner_all);
  const AgentRun run = run_helium("claude", {"-m", default_model_dir(), "-c", "1024", "--device", "cpu", "-t", "2"},
                             {"--flag", "x y"}, work, bin);
  EXPECT_EQ(run.code, 3) << run.err;
  const Json report = Json::parse(run.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << "stdout:\n" << run.out << "\nstderr:\n" << run.err;
  EXPECT_EQ(report["args"], Json::array({"--model", "helium-code-12m", "--flag", "x y"}));
  EXPECT_EQ(report["without_key"], 401);  // the server wants the key only this launch's agent was given
  EXPECT_EQ(report["status"], 200);
  EXPECT_EQ(report["type"], "message");
  EXPECT_EQ(report["model"], "helium-code-12m");
  EXPECT_EQ(report["window"], "1024");
  EXPECT_EQ(report["token_length"], 32);
  EXPECT_NE(run.err.find("helium: Claude Code on helium-code-12m at http://127.0.0.1:"), std::string::npos) << run.err;
  // The request log went to a file, not to the agent's terminal.
  const std::string log = read_text(work / "home" / ".cache" / "helium" / "logs" / "claude-server.log");
  EXPECT_NE(log.find(R"("path":"/v1/messages","status":200)"), std::string::npos) << log;
  EXPECT_EQ(run.err.find(R"("path":)"), std::string::npos) << run.err;
}

TEST(AgentLaunch, AMissingAgentIsAClearErrorWithTheInstallCommand) {
  const fs::path work = fresh_work_dir("missing");
  const AgentRun run = run_helium("opencode", {"-m", default_model_dir()}, {"run", "hi"}, work, work / "no-bin",
                             "PATH=/usr/bin:/bin");
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.err.find("helium: opencode was not found on PATH; install OpenCode with: npm install -g opencode-ai"),
            std::string::npos)
      << run.err;
}

TEST(AgentLaunch, DryRunPrintsThePlanAndTouchesNothing) {
  const fs::path work = fresh_work_dir("dry_run");
  const AgentRun run = run_helium("pi", {"-m", default_model_dir(), "--dry-run"}, {"-p", "it's"}, work, work / "no-bin");
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("# pi against helium-code-12m at http://127.0.0.1:<port> (context 2048 tokens)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("# writes " + (work / "home" / ".pi" / "agent" / "models.json").string()), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("HELIUM_PI_API_KEY='<hidden>'"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("pi --provider helium --model helium-code-12m -p 'it'\\''s'\n"), std::string::npos) << run.out;
  EXPECT_FALSE(fs::exists(work / "home" / ".pi"));
}

}  // namespace
}  // namespace helium::server::testing
