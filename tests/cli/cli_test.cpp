// `helium run` and `helium info` end to end: the golden models' greedy continuations through the real
// binary (text prompt -> tokenizer -> engine -> streamed text), and clear errors for bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "loader/checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace helium {
namespace {

struct Output {
  int code = 0;
  std::string out, err;
};

// Runs the binary with `args` (already shell-quoted) and `env` assignments before it, capturing stdout and
// stderr.
Output helium(const std::string& args, const std::string& env = "") {
  // ctest runs test cases as parallel processes: each call gets its own stderr file.
  static int calls = 0;
  std::string err_path = ::testing::TempDir() + "helium_cli_stderr_" + std::to_string(::getpid()) + "_" +
                         std::to_string(calls++) + ".txt";
  std::string cmd;
  if (!env.empty()) cmd.append("env ").append(env).append(" ");
  cmd.append(HELIUM_BINARY).append(" ").append(args).append(" 2>").append(err_path);
  Output o;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto err = read_file(err_path);
  if (err.is_ok()) o.err = err.value();
  std::remove(err_path.c_str());
  return o;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string model_dir(const std::string& name) { return std::string(HELIUM_SOURCE_DIR) + "/tests/data/models/" + name; }

// The ids after `label` ("prompt ids:", "generated ids:") in --show-ids output.
std::vector<int32_t> ids_after(const std::string& err, const std::string& label) {
  std::vector<int32_t> ids;
  auto at = err.find(label);
  if (at == std::string::npos) return ids;
  at += label.size();
  std::istringstream line(err.substr(at, err.find('\n', at) - at));
  int32_t id;
  while (line >> id) ids.push_back(id);
  return ids;
}

class CliGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(CliGolden, RunReproducesTheReferenceGreedyContinuation) {
  const std::string dir = model_dir(GetParam());
  WeightMap goldens;
  ASSERT_TRUE(load_safetensors(dir + "/goldens.safetensors", goldens).is_ok());
  auto file = MappedFile::open(dir + "/goldens.safetensors");
  ASSERT_TRUE(file.is_ok());
  auto header = parse_safetensors(file.value()->data(), file.value()->size(), "goldens.safetensors");
  ASSERT_TRUE(header.is_ok());
  auto prompts = nlohmann::json::parse(header->metadata.at("prompts"));
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string p = "p";  // built in two steps: g++ 12 -O3 warns falsely (-Wrestrict) on "p" + to_string
    p += std::to_string(i);
    const auto* ids = static_cast<const int64_t*>(goldens.find(p + ".ids")->data);
    const int64_t total = goldens.find(p + ".ids")->shape[0];
    const int64_t prompt_len = *static_cast<const int64_t*>(goldens.find(p + ".prompt_len")->data);
    std::vector<int32_t> expected(ids + prompt_len, ids + total);
    Output o = helium("run -m " + quote(dir) + " -p " + quote(prompts[i].get<std::string>()) +
                      " --temp 0 --ignore-eos -n 32 --show-ids -t 2");
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(ids_after(o.err, "generated ids:"), expected) << GetParam() << " prompt " << i << "\n" << o.err;
    EXPECT_NE(o.err.find("tok/s"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CliGolden, ::testing::Values("tiny-qwen3", "tiny-qwen2", "tiny-llama"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n;
                           for (char c : std::string_view(param.param).substr(5)) n.push_back(c);
                           return n;
                         });

TEST(Cli, DefaultModelWritesCode) {
  Output o = helium("run -p 'def fibonacci(n):' -n 48 --seed 1 -t 2");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.rfind("def fibonacci(n):", 0), 0u) << o.out;
  EXPECT_GT(o.out.size(), std::string("def fibonacci(n):").size() + 20) << o.out;
}

TEST(Cli, SameSeedSameTextDifferentSeedDifferentText) {
  Output a = helium("run -p 'import os' -n 24 --seed 7 --temp 1 -t 2");
  Output b = helium("run -p 'import os' -n 24 --seed 7 --temp 1 -t 1");
  Output c = helium("run -p 'import os' -n 24 --seed 8 --temp 1 -t 2");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);  // the thread count changes nothing
  EXPECT_NE(a.out, c.out);
}

// --chat renders the prompt with the model's own chat template (the embedded model's is ChatML), as the
// server does; --system puts a system turn first and needs --chat.
TEST(Cli, ChatRendersTheModelsTemplate) {
  auto tok = Tokenizer::from_dir(std::string(HELIUM_SOURCE_DIR) + "/" + HELIUM_DEFAULT_MODEL);
  ASSERT_TRUE(tok.is_ok()) << tok.error_message();
  Output plain = helium("run --chat -p 'Write a loop' -n 2 --temp 0 --show-ids -t 2");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(ids_after(plain.err, "prompt ids:"),
            tok.value()->encode("<|im_start|>user\nWrite a loop<|im_end|>\n<|im_start|>assistant\n", false))
      << plain.err;
  Output system = helium("run --chat --system 'Be brief.' -p 'Write a loop' -n 2 --temp 0 --show-ids -t 2");
  ASSERT_EQ(system.code, 0) << system.err;
  EXPECT_EQ(ids_after(system.err, "prompt ids:"),
            tok.value()->encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWrite a loop<|im_end|>\n"
                                "<|im_start|>assistant\n",
                                false))
      << system.err;
  Output no_chat = helium("run --system 'Be brief.' -p hi -n 2");
  EXPECT_EQ(no_chat.code, 1);
  EXPECT_NE(no_chat.err.find("--system needs --chat"), std::string::npos) << no_chat.err;
}

TEST(Cli, InfoPrintsArchitectureAndMemoryPlan) {
  Output o = helium("info -m " + quote(model_dir("tiny-qwen3")));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("qwen3"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("parameters   199296"), std::string::npos) << o.out;  // the index's total_parameters
  EXPECT_NE(o.out.find("KV cache"), std::string::npos) << o.out;
}

TEST(Cli, BadInputGetsClearErrors) {
  Output missing = helium("run -m /nonexistent/model -p hi");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model"), std::string::npos) << missing.err;
  Output bad_flag = helium("run -p hi --top-p 7");
  EXPECT_NE(bad_flag.code, 0);
  EXPECT_NE(bad_flag.err.find("top-p"), std::string::npos) << bad_flag.err;
  Output no_prompt = helium("run");
  EXPECT_NE(no_prompt.code, 0);
  EXPECT_NE(no_prompt.err.find("prompt"), std::string::npos) << no_prompt.err;
  for (const char* sub : {"run", "info"}) {
    Output help = helium(std::string(sub) + " --help");
    EXPECT_EQ(help.code, 0);
    EXPECT_NE(help.out.find("--model"), std::string::npos) << help.out;
  }
}

// `helium bench` on the CPU with the embedded model, short: every figure beside its ceiling, the JSON
// with the payload's fields; --submit --dry-run shows the payload and the gh commands and needs no gh.
TEST(Cli, BenchPrintsFiguresBesideTheCeilingAndWritesJson) {
  const std::string json_path = ::testing::TempDir() + "helium_bench_" + std::to_string(::getpid()) + ".json";
  Output o = helium("bench --device cpu -t 2 --contexts 16,48 --tokens 6 --prefill 32 --runs 2 --json " + quote(json_path));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("model   helium-code-12m (qwen3"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("decode  context     16:"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("decode  context     48:"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ceiling"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("prefill     32 tokens:"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("memory  "), std::string::npos) << o.out;
  auto text = read_file(json_path);
  ASSERT_TRUE(text.is_ok());
  const auto j = nlohmann::json::parse(text.value());
  EXPECT_EQ(j["schema"], "helium-bench/1");
  EXPECT_EQ(j["model"]["name"], "helium-code-12m");
  ASSERT_EQ(j["decode"].size(), 2u);
  for (const auto& d : j["decode"]) {
    EXPECT_GT(d["tok_s"].get<double>(), 0);
    EXPECT_GT(d["ceiling_tok_s"].get<double>(), 0);
    EXPECT_NEAR(d["ratio"].get<double>(), d["tok_s"].get<double>() / d["ceiling_tok_s"].get<double>(), 1e-9);
  }
  // The longer context reads more K/V per token: its ceiling is lower.
  EXPECT_LT(j["decode"][1]["ceiling_tok_s"].get<double>(), j["decode"][0]["ceiling_tok_s"].get<double>());
  EXPECT_GT(j["prefill"]["tok_s"].get<double>(), 0);
  EXPECT_GT(j["bandwidth"]["gb_per_s"].get<double>(), 0);
  EXPECT_GT(j["machine"]["logical_cpus"].get<int>(), 0);
  EXPECT_EQ(j["device"]["pipelined"], false);  // greedy steps are queued ahead by default on a GPU only
  EXPECT_NE(o.out.find("(greedy steps waited on)"), std::string::npos) << o.out;
  std::remove(json_path.c_str());
}

// --pipeline on|off chooses the greedy loop (auto: pipelined on a GPU); the tokens are the same either way.
TEST(Cli, PipelineSwitchKeepsTheTokens) {
  Output on = helium("run -p 'def add(a, b):' -n 24 --temp 0 --show-ids -t 2 --pipeline on");
  Output off = helium("run -p 'def add(a, b):' -n 24 --temp 0 --show-ids -t 2 --pipeline off");
  ASSERT_EQ(on.code, 0) << on.err;
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_FALSE(ids_after(on.err, "generated ids:").empty()) << on.err;
  EXPECT_EQ(ids_after(on.err, "generated ids:"), ids_after(off.err, "generated ids:"));
  EXPECT_EQ(on.out, off.out);
  Output bench = helium("bench --device cpu -t 2 --contexts 16 --tokens 4 --prefill 0 --runs 1 --pipeline on");
  ASSERT_EQ(bench.code, 0) << bench.err;
  EXPECT_NE(bench.out.find("(greedy steps pipelined)"), std::string::npos) << bench.out;
  Output bad = helium("run -p hi --pipeline maybe");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--pipeline"), std::string::npos) << bad.err;
}

// `--load-format dummy` from a config alone (no weights, no tokenizer): bench measures it, since it needs
// token ids only; run, which writes text, refuses before it allocates anything and says why.
TEST(Cli, BenchRunsOnAConfigAloneWithDummyWeights) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("helium_config_only_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(fs::path(HELIUM_SOURCE_DIR) / "models" / "helium-code-12m" / "config.json", dir / "config.json");
  const std::string json_path = (dir / "bench.json").string();
  Output o = helium("bench --device cpu -t 2 --model " + quote(dir.string()) +
                    " --load-format dummy --contexts 16 --tokens 4 --prefill 16 --runs 1 --json " + quote(json_path));
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("BF16 weights, dummy)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("decode  context     16:"), std::string::npos) << o.out;
  auto text = read_file(json_path);
  ASSERT_TRUE(text.is_ok());
  const auto j = nlohmann::json::parse(text.value());
  EXPECT_EQ(j["model"]["load_format"], "dummy");
  ASSERT_EQ(j["decode"].size(), 1u);
  EXPECT_GT(j["decode"][0]["tok_s"].get<double>(), 0);

  Output run = helium("run --device cpu -t 2 --model " + quote(dir.string()) + " --load-format dummy -p hi");
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.err.find(dir.string() + " has no tokenizer.json: generating text needs the model's tokenizer"),
            std::string::npos)
      << run.err;
  fs::remove_all(dir);
}

// Every command that takes --load-format refuses a misspelt value (rather than loading the checkpoint) and
// names the option. `serve` is left out: the same helper declares its option, and a regression would serve.
TEST(Cli, LoadFormatRefusesAnythingButWeightsOrDummy) {
  for (const char* command : {"run -p hi", "bench", "tune", "claude --dry-run"}) {
    Output bad = helium(std::string(command) + " --load-format dumy");
    EXPECT_NE(bad.code, 0) << command;
    EXPECT_NE(bad.err.find("--load-format"), std::string::npos) << command << ": " << bad.err;
  }
}

TEST(Cli, BenchSubmitDryRunShowsThePayloadAndRunsNothing) {
  // No gh on this PATH: a dry run must not need it.
  Output o = helium("bench --device cpu -t 2 --contexts 16 --tokens 4 --prefill 0 --runs 1 --submit --dry-run");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("# --dry-run: nothing is sent."), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"schema\": \"helium-bench/1\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("gh pr create --repo "), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find(HELIUM_SOURCE_DIR), std::string::npos) << o.out;  // no path of this checkout
}

TEST(Cli, BenchRefusesWhatItCannotDoBeforeMeasuring) {
  Output dry_alone = helium("bench --dry-run");
  EXPECT_EQ(dry_alone.code, 1);
  EXPECT_NE(dry_alone.err.find("--dry-run shows what --submit would send"), std::string::npos) << dry_alone.err;
  Output no_gh = helium("bench --submit --yes --device cpu", "PATH=/nonexistent");
  EXPECT_EQ(no_gh.code, 1);
  EXPECT_NE(no_gh.err.find("gh was not found on PATH"), std::string::npos) << no_gh.err;
  Output bad_contexts = helium("bench --device cpu --contexts 16,x");
  EXPECT_EQ(bad_contexts.code, 1);
  EXPECT_NE(bad_contexts.err.find("--contexts wants positive token counts"), std::string::npos) << bad_contexts.err;
}

}  // namespace
}  // namespace helium
