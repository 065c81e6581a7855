// tests/report/bench_report_test.cpp — what `helium bench --submit` shares and how it opens the pull
// request: the payload (machine kind, never user, home or host), its path in the table, the gh steps
// with their placeholders, the dry run's text, and submit() driving a stand-in gh that records each call
// and decodes the uploaded file with coreutils' base64.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "report/bench_report.h"

namespace helium::report {
namespace {

namespace fs = std::filesystem;

OrderedJson sample_result() {
  return {{"model", {{"name", "8b"}, {"family", "qwen3"}, {"parameters", 8190735360LL}}},
          {"device", {{"name", "cuda (NVIDIA H200, sm_90)"}}},
          {"decode", {{{"context", 1024}, {"tok_s", 228.86}, {"ceiling_tok_s", 275.64}}}}};
}

MachineFacts sample_machine() {
  MachineFacts m;
  m.cpu_model = "AMD EPYC 9654";
  m.logical_cpus = 16;
  m.memory_gib = 125.4;
  m.os = "Linux 6.1 x86_64";
  return m;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(BenchReport, PayloadHoldsTheResultTheMachineKindAndTheDay) {
  const OrderedJson p = make_payload(sample_result(), sample_machine(), "0.1.0", "2026-12-04");
  EXPECT_EQ(p["schema"], "helium-bench/1");
  EXPECT_EQ(p["helium"], "0.1.0");
  EXPECT_EQ(p["date"], "2026-12-04");
  EXPECT_EQ(p["machine"]["cpu"], "AMD EPYC 9654");
  EXPECT_EQ(p["machine"]["memory_gib"], 125.0);
  EXPECT_EQ(p["decode"][0]["tok_s"], 228.86);
  EXPECT_EQ(p["device"]["name"], "cuda (NVIDIA H200, sm_90)");
}

TEST(BenchReport, ThisMachinesFactsNameNoOne) {
  const MachineFacts m = MachineFacts::of_this_machine();
  EXPECT_GT(m.logical_cpus, 0);
  EXPECT_GT(m.memory_gib, 0.1);
  EXPECT_TRUE(m.os.rfind("Linux ", 0) == 0) << m.os;
  const std::string text = make_payload(sample_result(), m, "0.1.0", "2026-12-04").dump();
  EXPECT_TRUE(check_payload_is_anonymous(text).is_ok()) << check_payload_is_anonymous(text).message();
}

TEST(BenchReport, PayloadNamingTheUserTheHomeOrTheHostIsRefused) {
  const char* old_user = std::getenv("USER");
  const std::string saved = old_user ? old_user : "";
  ::setenv("USER", "alice-bench", 1);
  OrderedJson p = make_payload(sample_result(), sample_machine(), "0.1.0", "2026-12-04");
  EXPECT_TRUE(check_payload_is_anonymous(p.dump()).is_ok());
  p["model"]["name"] = "/data/alice-bench/models/qwen";
  const Status named = check_payload_is_anonymous(p.dump());
  ASSERT_FALSE(named.is_ok());
  EXPECT_NE(named.message().find("the payload contains USER (\"alice-bench\")"), std::string::npos) << named.message();
  p["model"]["name"] = "/home/someone/qwen";
  EXPECT_FALSE(check_payload_is_anonymous(p.dump()).is_ok());
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  if (std::string_view(host).size() >= 3) {
    p["model"]["name"] = std::string("built on ") + host;
    EXPECT_FALSE(check_payload_is_anonymous(p.dump()).is_ok());
  }
  if (old_user) ::setenv("USER", saved.c_str(), 1);
  else ::unsetenv("USER");
}

TEST(BenchReport, PathIsDeviceModelAndDayWithAHashOfThePayload) {
  const OrderedJson p = make_payload(sample_result(), sample_machine(), "0.1.0", "2026-12-04");
  const std::string path = payload_path(p);
  EXPECT_TRUE(std::regex_match(path, std::regex(R"(results/cuda-nvidia-h200-sm-90/8b/2026-12-04-[0-9a-f]{8}\.json)"))) << path;
  EXPECT_EQ(payload_path(p), path);  // the same payload, the same name
  OrderedJson other = p;
  other["decode"][0]["tok_s"] = 229.0;
  EXPECT_NE(payload_path(other), path);
}

TEST(BenchReport, DryRunTextShowsTheFileAndEveryCommand) {
  const Submission s = plan_submission(make_payload(sample_result(), sample_machine(), "0.1.0", "2026-12-04"), "org/table");
  const std::string text = describe_submission(s);
  EXPECT_NE(text.find("# the file " + s.path + " in org/table:\n" + s.content), std::string::npos) << text;
  EXPECT_NE(text.find("gh auth status\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gh repo fork org/table --clone=false --default-branch-only\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gh api -X POST 'repos/<login>/table/git/refs' -f ref=refs/heads/" + s.branch + " -f 'sha=<sha>'"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-f 'content=<the file above, base64>'"), std::string::npos) << text;
  EXPECT_NE(text.find("gh pr create --repo org/table --base '<base>' --head '<login>:" + s.branch + "'"), std::string::npos)
      << text;
  EXPECT_EQ(s.title, "bench: 8b on cuda (NVIDIA H200, sm_90)");
}

// A stand-in gh: records each call's arguments, answers the lookups, decodes the uploaded file.
constexpr const char* kFakeGh = R"(#!/bin/sh
printf '%s' "$*" | tr '\n' '|' >> "$GH_LOG"; echo >> "$GH_LOG"
case "$*" in
  "auth status") [ -n "$GH_FAIL_AUTH" ] && { echo "You are not logged into any GitHub hosts." >&2; exit 1; }; exit 0 ;;
  "api user --jq .login") echo octocat ;;
  "api repos/org/table --jq .default_branch") echo main ;;
  "api repos/octocat/table/git/ref/heads/main --jq .object.sha") echo abc123 ;;
  "api -X PUT"*) for a in "$@"; do case "$a" in content=*) printf '%s' "${a#content=}" | base64 -d > "$GH_LOG.content" ;; esac; done ;;
  "pr create"*) echo https://github.com/org/table/pull/7 ;;
esac
exit 0
)";

TEST(BenchReport, SubmitRunsTheStepsWithTheValuesGhPrinted) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("helium_gh_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "gh") << kFakeGh;
  fs::permissions(dir / "gh", fs::perms::owner_all);
  ::setenv("GH_LOG", (dir / "log").c_str(), 1);
  const Submission s = plan_submission(make_payload(sample_result(), sample_machine(), "0.1.0", "2026-12-04"), "org/table");
  auto url = submit(s, dir / "gh");
  ASSERT_TRUE(url.is_ok()) << url.error_message();
  EXPECT_EQ(url.value(), "https://github.com/org/table/pull/7");
  std::vector<std::string> calls;
  std::stringstream log(read_text(dir / "log"));
  for (std::string line; std::getline(log, line);) calls.push_back(line);
  ASSERT_EQ(calls.size(), 8u) << read_text(dir / "log");
  EXPECT_EQ(calls[2], "repo fork org/table --clone=false --default-branch-only");
  EXPECT_EQ(calls[5], "api -X POST repos/octocat/table/git/refs -f ref=refs/heads/" + s.branch + " -f sha=abc123");
  EXPECT_TRUE(calls[6].rfind("api -X PUT repos/octocat/table/contents/" + s.path + " -f message=" + s.title, 0) == 0) << calls[6];
  EXPECT_TRUE(calls[7].rfind("pr create --repo org/table --base main --head octocat:" + s.branch + " --title " + s.title, 0) == 0)
      << calls[7];
  EXPECT_EQ(read_text(dir / "log.content"), s.content);  // what reached the table is the payload shown

  // Not logged in: the first step stops it, saying what to do.
  fs::remove(dir / "log");
  ::setenv("GH_FAIL_AUTH", "1", 1);
  auto refused = submit(s, dir / "gh");
  ::unsetenv("GH_FAIL_AUTH");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.error_message().find("You are not logged into any GitHub hosts."), std::string::npos);
  EXPECT_NE(refused.error_message().find("gh auth login"), std::string::npos);
  EXPECT_EQ(read_text(dir / "log"), "auth status\n");  // nothing after the failed step
  ::unsetenv("GH_LOG");
}

}  // namespace
}  // namespace helium::report
