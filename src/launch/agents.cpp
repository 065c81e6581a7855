// launch/agents.cpp — each agent's settings for a helium endpoint. What each setting is for, and the
// traffic it shapes, is in docs/ARCHITECTURE.md ("Launchers"); the choices were checked by running the
// agents (Claude Code 2.1.332, Codex 0.171.0, OpenCode 1.18.33, pi 0.73.1) against the server.
#include "launch/agents.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/cache_dir.h"

namespace helium::launch {
namespace {

using OrderedJson = nlohmann::ordered_json;

// The provider name helium registers in the agents that keep a provider table (Codex, OpenCode, pi).
constexpr std::string_view kProvider = "helium";
// Environment variables through which Codex and pi read the key (their configuration names the
// variable, so the key itself is never written to a file).
constexpr std::string_view kCodexKeyVariable = "HELIUM_CODEX_API_KEY";
constexpr std::string_view kPiKeyVariable = "HELIUM_PI_API_KEY";

// Agents insist on some key; a server without one ignores whatever is sent.
std::string key_or_placeholder(const Endpoint& e) { return e.api_key.empty() ? "helium" : e.api_key; }

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

// A TOML basic string: JSON's escapes are TOML's (\" \\ \n \t \uXXXX), so JSON's quoting is valid TOML.
std::string toml_string(const std::string& s) { return nlohmann::json(s).dump(); }

// A file name for the model's catalog entry: the model id with anything but [A-Za-z0-9._-] replaced.
std::string file_stem(const std::string& model) {
  std::string stem = model;
  for (char& c : stem)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return stem.empty() ? "model" : stem;
}

void append_user_args(LaunchPlan& plan, const std::vector<std::string>& agent_args) {
  plan.argv.insert(plan.argv.end(), agent_args.begin(), agent_args.end());
}

// Claude Code: Anthropic Messages at ANTHROPIC_BASE_URL (it appends /v1/messages), every model tier
// mapped to the served model (its background calls ask for the "haiku" tier), the window it must fit
// (CLAUDE_CODE_MAX_CONTEXT_TOKENS: without it, an unknown model id is assumed to hold a million tokens),
// and its per-request attribution block off (it changes every request and would defeat the prompt cache).
LaunchPlan plan_claude(const Endpoint& e, const std::vector<std::string>& agent_args) {
  LaunchPlan plan;
  plan.argv = {"claude", "--model", e.model};
  append_user_args(plan, agent_args);
  const std::string context = std::to_string(e.context_tokens);
  plan.env = {
      {"ANTHROPIC_BASE_URL", e.base_url},
      {"ANTHROPIC_AUTH_TOKEN", key_or_placeholder(e)},
      {"ANTHROPIC_API_KEY", ""},  // empty: a key of the user's own would be sent instead of the token
      {"ANTHROPIC_MODEL", e.model},
      {"ANTHROPIC_DEFAULT_OPUS_MODEL", e.model},
      {"ANTHROPIC_DEFAULT_SONNET_MODEL", e.model},
      {"ANTHROPIC_DEFAULT_HAIKU_MODEL", e.model},
      {"CLAUDE_CODE_SUBAGENT_MODEL", e.model},
      {"CLAUDE_CODE_MAX_CONTEXT_TOKENS", context},
      {"CLAUDE_CODE_MAX_OUTPUT_TOKENS", std::to_string(agent_max_output_tokens(e.context_tokens))},
      {"CLAUDE_CODE_ATTRIBUTION_HEADER", "0"},
      // The served id does not start with "claude": listing models would find none to offer.
      {"CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY", "0"},
  };
  if (!e.api_key.empty()) plan.secrets = {e.api_key};
  return plan;
}

// Codex: a provider of its own (a provider named "openai" would ignore the base URL), the Responses wire
// (Codex speaks nothing else), given as `-c` overrides so the user's CODEX_HOME (history, auth, other
// providers) stays as it is; the model's metadata from a catalog file, without which Codex warns and
// guesses the window.
Result<LaunchPlan> plan_codex(const Endpoint& e, const std::vector<std::string>& agent_args, const LaunchEnvironment& env) {
  const std::filesystem::path catalog = env.cache_dir / "codex" / (file_stem(e.model) + ".json");
  const OrderedJson entry = codex_catalog_entry(e.model, e.context_tokens);
  LaunchPlan plan;
  plan.files.push_back({catalog, OrderedJson{{"models", {entry}}}.dump(2) + "\n"});
  const std::string provider = "model_providers." + std::string(kProvider);
  const std::vector<std::string> overrides = {
      "model_provider=" + toml_string(std::string(kProvider)),
      provider + ".name=" + toml_string(std::string(kProvider)),
      provider + ".base_url=" + toml_string(e.base_url + "/v1"),
      provider + ".env_key=" + toml_string(std::string(kCodexKeyVariable)),
      provider + ".wire_api=" + toml_string("responses"),
      "model=" + toml_string(e.model),
      "model_context_window=" + std::to_string(e.context_tokens),
      // Compact before the window is full rather than after the server refuses a turn.
      "model_auto_compact_token_limit=" + std::to_string(e.context_tokens * 9 / 10),
      "model_catalog_json=" + toml_string(catalog.string()),
  };
  plan.argv = {"codex"};
  for (const std::string& o : overrides) {
    plan.argv.push_back("-c");
    plan.argv.push_back(o);
  }
  append_user_args(plan, agent_args);
  plan.env = {{std::string(kCodexKeyVariable), key_or_placeholder(e)}};
  if (!e.api_key.empty()) plan.secrets = {e.api_key};
  return plan;
}

// OpenCode: an OpenAI-compatible provider (bundled with OpenCode, nothing is fetched) given in
// OPENCODE_CONFIG_CONTENT, the highest-precedence configuration, merged over the user's own; the model
// needs its limits there (OpenCode lists no models of a custom provider, and without a context limit
// it never compacts).
LaunchPlan plan_opencode(const Endpoint& e, const std::vector<std::string>& agent_args) {
  const std::string qualified = std::string(kProvider) + "/" + e.model;
  OrderedJson model = {{"name", e.model},
                       {"limit", {{"context", e.context_tokens}, {"output", agent_max_output_tokens(e.context_tokens)}}}};
  OrderedJson provider = {{"npm", "@ai-sdk/openai-compatible"},
                          {"name", "helium"},
                          {"options", {{"baseURL", e.base_url + "/v1"}, {"apiKey", key_or_placeholder(e)}}},
                          {"models", {{e.model, model}}}};
  OrderedJson config = {{"$schema", "https://opencode.ai/config.json"},
                        {"provider", {{std::string(kProvider), provider}}},
                        {"model", qualified},
                        {"small_model", qualified}};
  LaunchPlan plan;
  plan.argv = {"opencode"};
  append_user_args(plan, agent_args);
  plan.env = {{"OPENCODE_CONFIG_CONTENT", config.dump()}};
  if (!e.api_key.empty()) plan.secrets = {e.api_key};
  return plan;
}

// pi: providers live only in its models.json, so helium's entry is merged into the user's file (the
// other providers kept as they are); the key stays out of the file (apiKey names an environment
// variable). Chat Completions with max_tokens, no developer role and no `store` (pi's defaults for
// a localhost URL assume OpenAI's newer fields).
Result<LaunchPlan> plan_pi(const Endpoint& e, const std::vector<std::string>& agent_args, const LaunchEnvironment& env) {
  const std::filesystem::path models_path = env.pi_agent_dir / "models.json";
  OrderedJson models = OrderedJson::object();
  std::error_code ec;
  if (std::filesystem::exists(models_path, ec)) {
    std::ifstream in(models_path);
    if (!in) return Status::error(models_path.string() + ": cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find_first_not_of(" \t\r\n") != std::string::npos) {
      try {
        models = OrderedJson::parse(text.str());
      } catch (const nlohmann::json::parse_error& error) {
        return Status::error(models_path.string() + ": is not valid JSON (" + error.what() +
                             "); helium adds its provider to this file, and leaves it as it is until it parses");
      }
    }
    if (!models.is_object())
      return Status::error(models_path.string() + ": must hold a JSON object; helium leaves it as it is");
    if (models.contains("providers") && !models["providers"].is_object())
      return Status::error(models_path.string() + ": `providers` must be an object; helium leaves the file as it is");
  }
  OrderedJson model = {{"id", e.model},
                       {"name", e.model},
                       {"reasoning", false},
                       {"input", {"text"}},
                       {"contextWindow", e.context_tokens},
                       {"maxTokens", agent_max_output_tokens(e.context_tokens)}};
  models["providers"][std::string(kProvider)] = {
      {"baseUrl", e.base_url + "/v1"},
      {"api", "openai-completions"},
      {"apiKey", std::string(kPiKeyVariable)},
      {"compat", {{"supportsDeveloperRole", false}, {"supportsStore", false}, {"maxTokensField", "max_tokens"}}},
      {"models", {model}}};
  LaunchPlan plan;
  plan.files.push_back({models_path, models.dump(2) + "\n"});
  plan.argv = {"pi", "--provider", std::string(kProvider), "--model", e.model};
  append_user_args(plan, agent_args);
  plan.env = {{std::string(kPiKeyVariable), key_or_placeholder(e)}};
  if (!e.api_key.empty()) plan.secrets = {e.api_key};
  return plan;
}

}  // namespace

const std::vector<AgentInfo>& known_agents() {
  static const std::vector<AgentInfo> agents = {
      {Agent::kClaude, "claude", "claude", "@anthropic-ai/claude-code", "Claude Code"},
      {Agent::kCodex, "codex", "codex", "@openai/codex", "Codex CLI"},
      {Agent::kOpenCode, "opencode", "opencode", "opencode-ai", "OpenCode"},
      {Agent::kPi, "pi", "pi", "@mariozechner/pi-coding-agent", "pi"},
  };
  return agents;
}

const AgentInfo& agent_info(Agent agent) {
  for (const AgentInfo& info : known_agents())
    if (info.agent == agent) return info;
  return known_agents().front();  // unreachable: every enumerator is listed
}

LaunchEnvironment LaunchEnvironment::from_process() {
  LaunchEnvironment env;
  env.home = getenv_or("HOME", ".");
  env.cache_dir = helium_cache_dir();
  env.pi_agent_dir = getenv_or("PI_CODING_AGENT_DIR", (env.home / ".pi" / "agent").string());
  return env;
}

nlohmann::ordered_json codex_catalog_entry(const std::string& model, int64_t context_tokens) {
  return {{"slug", model},
          {"display_name", model},
          {"description", "served by helium"},
          {"context_window", context_tokens},
          {"shell_type", "default"},
          {"visibility", "list"},
          {"supported_in_api", true},
          {"priority", 0},
          {"upgrade", nullptr},
          {"base_instructions", ""},
          {"supports_reasoning_summaries", false},
          {"support_verbosity", false},
          {"default_verbosity", nullptr},
          {"apply_patch_tool_type", nullptr},
          {"truncation_policy", {{"mode", "bytes"}, {"limit", 10000}}},
          {"supports_parallel_tool_calls", false},
          {"supported_reasoning_levels", OrderedJson::array()},
          {"experimental_supported_tools", OrderedJson::array()},
          {"input_modalities", {"text"}}};
}

int64_t agent_max_output_tokens(int64_t context_tokens) {
  return std::clamp<int64_t>(context_tokens / 4, 1024, 32000);
}

Result<LaunchPlan> plan_launch(Agent agent, const Endpoint& endpoint, const std::vector<std::string>& agent_args,
                               const LaunchEnvironment& environment) {
  if (endpoint.model.empty()) return Status::error("the server lists no model to give the agent");
  if (endpoint.context_tokens <= 0) return Status::error("the server's context length is unknown");
  switch (agent) {
    case Agent::kClaude: return plan_claude(endpoint, agent_args);
    case Agent::kCodex: return plan_codex(endpoint, agent_args, environment);
    case Agent::kOpenCode: return plan_opencode(endpoint, agent_args);
    case Agent::kPi: return plan_pi(endpoint, agent_args, environment);
  }
  return Status::error("unknown agent");
}

std::string shell_quote(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string describe_plan(const LaunchPlan& plan) {
  std::string out;
  for (const FileToWrite& file : plan.files) out += "# writes " + file.path.string() + ":\n" + file.content;
  for (const auto& [name, value] : plan.env) out += name + "=" + shell_quote(value) + " \\\n";
  for (size_t i = 0; i < plan.argv.size(); ++i) {
    if (i > 0) out += " ";
    out += shell_quote(plan.argv[i]);
  }
  out += "\n";
  for (const std::string& secret : plan.secrets) {
    if (secret.empty()) continue;
    for (size_t at = out.find(secret); at != std::string::npos; at = out.find(secret, at + 8))
      out.replace(at, secret.size(), "<hidden>");
  }
  return out;
}

}  // namespace helium::launch
