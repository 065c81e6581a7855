// cli/bench.cpp — `helium bench`: measures this machine on a model (decode at several contexts and a
// prefill, each beside the ceiling the measured memory bandwidth allows), and with --submit offers the
// result to the project's community table as a pull request, asking first (--dry-run shows the exact
// payload and commands and runs nothing). Argument parsing and printing only: the protocol is
// engine/speed_test.h's, the payload and the pull request report/'s.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "engine/speed_test.h"
#include "launch/process.h"
#include "report/bench_report.h"

namespace helium::cli {
namespace {

Result<std::vector<int64_t>> parse_contexts(const std::string& list) {
  std::vector<int64_t> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1) return Status::error("--contexts wants positive token counts, e.g. 1024,8192; not \"" + list + "\"");
    out.push_back(v);
  }
  if (out.empty()) return Status::error("--contexts is empty");
  return out;
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char day[16];
  std::strftime(day, sizeof day, "%Y-%m-%d", &tm);
  return day;
}

// The model's name as shared: a catalog name or repo id as given; a directory by its family and size only
// (its path or folder name may say who made it).
std::string shared_model_name(const BenchOptions& o, const Engine& e) {
  if (!o.model.empty() && !std::filesystem::is_directory(o.model)) return o.model;
  if (o.model.empty()) return std::filesystem::path(default_model_path()).filename().string();
  char size[32];
  std::snprintf(size, sizeof size, "%.2fB", static_cast<double>(e.model().info().parameters) / 1e9);
  return e.model().info().family + "-" + size + " (local checkpoint)";
}

bool ask_yes(const std::string& question) {
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace

void add_bench_command(CLI::App& app, BenchOptions& o) {
  CLI::App* bench = app.add_subcommand("bench", "Measure decode and prefill speed on this machine beside its memory-bandwidth ceiling; --submit offers the result to the community table");
  bench->add_option("-m,--model", o.model,
                    "Catalog name, Hugging Face repo[@revision] or model directory; default: the embedded model");
  bench->add_option("--device", o.device, "auto (a GPU when present), cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  bench->add_option("-t,--threads", o.threads, "CPU threads (0 = all)")->check(CLI::NonNegativeNumber);
  add_load_format_option(bench, o.load_format, "weights, or dummy: random weights of the config's shapes");
  add_pipeline_option(bench, o.pipeline);
  bench->add_option("--contexts", o.contexts, "Contexts to decode at, comma-separated (default: 1024,8192,32768 on a GPU, 128,1024 on the CPU)");
  bench->add_option("--tokens", o.tokens, "Tokens generated per decode run (default: 512 on a GPU, 64 on the CPU)")->check(CLI::Range(2, 1 << 20));
  bench->add_option("--prefill", o.prefill, "Prompt tokens of the prefill test, 0 for none (default: 4096 on a GPU, 512 on the CPU)")->check(CLI::NonNegativeNumber);
  bench->add_option("--runs", o.runs, "Timed runs per figure, after a warm-up; the median is reported")->check(CLI::Range(1, 100));
  bench->add_option("--json", o.json_path, "Also write the result as JSON to this file");
  bench->add_flag("--offline", o.offline, "Never touch the network: use the Hugging Face cache only");
  bench->add_flag("--submit", o.submit, "Offer the result to the community table as a pull request (through gh; asks first)");
  bench->add_flag("--dry-run", o.dry_run, "With --submit: print the exact payload and gh commands, run nothing");
  bench->add_flag("-y,--yes", o.yes, "With --submit: do not ask");
}

int bench_command(const BenchOptions& o) {
  auto fail = [](const std::string& message) {
    std::cerr << "helium: " << message << "\n";
    return 1;
  };
  if (o.dry_run && !o.submit) return fail("--dry-run shows what --submit would send: give both");
  std::string gh;
  if (o.submit && !o.dry_run) {  // before the minutes of measuring: is there a way to submit at all?
    const char* path = std::getenv("PATH");
    auto found = launch::find_executable("gh", path != nullptr ? path : "");
    if (!found.is_ok()) return fail("--submit opens a pull request with the GitHub CLI, and gh was not found on PATH (https://cli.github.com)");
    gh = found->string();
    if (!o.yes && !::isatty(STDIN_FILENO)) return fail("--submit asks before it sends anything; with no terminal to ask on, give --yes");
  }

  EngineOptions eo;
  eo.device = o.device;
  eo.threads = o.threads;
  eo.load_format = load_format_choice(o.load_format);
  eo.pipeline = pipeline_choice(o.pipeline);
  eo.prompt_cache_sequences = 0;
  eo.text = false;  // ids only: a config with --load-format dummy needs no tokenizer
  const std::string name = o.model.empty() ? default_model_path() : o.model;
  auto resolved = resolve_model_for_cli(name, o.offline);
  if (!resolved.is_ok()) return fail(resolved.error_message());
  // Defaults: the benchmark protocol on a GPU (DESIGN.md), a short version on the CPU; the context is
  // sized to hold the largest run.
  const bool gpu = resolve_device(o.device) == "cuda";
  SpeedTestOptions so;
  so.runs = o.runs;
  auto contexts = parse_contexts(!o.contexts.empty() ? o.contexts : gpu ? "1024,8192,32768" : "128,1024");
  if (!contexts.is_ok()) return fail(contexts.error_message());
  so.contexts = contexts.value();
  so.decode_tokens = o.tokens > 0 ? o.tokens : gpu ? 512 : 64;
  so.prefill_tokens = o.prefill >= 0 ? o.prefill : gpu ? 4096 : 512;
  eo.context = std::max(*std::max_element(so.contexts.begin(), so.contexts.end()) + so.decode_tokens, so.prefill_tokens + 1) + 16;
  auto engine = Engine::load(resolved->dir, eo);
  if (!engine.is_ok()) return fail(engine.error_message());
  Engine& e = *engine.value();

  const std::string model_name = shared_model_name(o, e);
  std::printf("model   %s (%s, %.2f B parameters, %s weights%s)\n", model_name.c_str(), e.model().info().family.c_str(),
              static_cast<double>(e.model().info().parameters) / 1e9, e.model().info().weight_dtype.c_str(),
              o.load_format == "dummy" ? ", dummy" : "");
  std::printf("device  %s (greedy steps %s)\n", e.backend_name().c_str(), e.pipelined() ? "pipelined" : "waited on");
  std::fflush(stdout);
  auto measured = run_speed_test(e, so, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  if (!measured.is_ok()) return fail(measured.error_message());
  const SpeedTestResult& r = measured.value();
  std::printf("memory  %.1f GB/s (%s); %.3f GB of weights and %.1f KB of K/V per position read per token\n",
              r.bandwidth.bytes_per_second / 1e9, r.bandwidth.method.c_str(), r.weight_bytes_per_token / 1e9,
              r.kv_bytes_per_position / 1e3);

  report::OrderedJson result = {
      {"model", {{"name", model_name}, {"family", e.model().info().family}, {"parameters", e.model().info().parameters},
                 {"weight_dtype", e.model().info().weight_dtype}, {"load_format", o.load_format}}},
      {"device", {{"name", e.backend_name()}, {"pipelined", e.pipelined()}}},
      {"bandwidth", {{"gb_per_s", r.bandwidth.bytes_per_second / 1e9}, {"method", r.bandwidth.method}}},
      {"bytes_per_token", {{"weights", r.weight_bytes_per_token}, {"kv_per_position", r.kv_bytes_per_position}}},
      {"runs", so.runs},
      {"decode", report::OrderedJson::array()}};
  for (const DecodeSpeed& d : r.decode)
    result["decode"].push_back({{"context", d.context}, {"tokens", d.tokens}, {"tok_s", d.tok_s},
                                {"ceiling_tok_s", d.ceiling_tok_s}, {"ratio", d.tok_s / d.ceiling_tok_s}});
  if (r.prefill_tokens > 0) result["prefill"] = {{"tokens", r.prefill_tokens}, {"tok_s", r.prefill_tok_s}};
  const report::OrderedJson payload =
      report::make_payload(result, report::MachineFacts::of_this_machine(), HELIUM_VERSION, today_utc());
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << payload.dump(2) << "\n";
    if (!out) return fail(o.json_path + ": cannot be written");
  }
  if (!o.submit) return 0;

  const std::string text = payload.dump(2);
  if (Status anonymous = report::check_payload_is_anonymous(text); !anonymous.is_ok()) return fail(anonymous.message());
  const report::Submission submission = report::plan_submission(payload, report::community_repo());
  if (o.dry_run) {
    std::printf("\n# --dry-run: nothing is sent. --submit would open a pull request to %s:\n%s", submission.repo.c_str(),
                report::describe_submission(submission).c_str());
    return 0;
  }
  std::fprintf(stderr, "\nhelium: --submit sends this file to %s as a pull request from your GitHub account:\n%s\n",
               submission.repo.c_str(), submission.content.c_str());
  if (!o.yes && !ask_yes("Open the pull request?")) {
    std::fprintf(stderr, "helium: not submitted\n");
    return 0;
  }
  auto url = report::submit(submission, gh);
  if (!url.is_ok()) return fail(url.error_message());
  std::printf("pull request: %s\n", url->c_str());
  return 0;
}

}  // namespace helium::cli
