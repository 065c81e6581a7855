// report/bench_report.cpp — see bench_report.h.
#include "report/bench_report.h"

#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "hub/digest.h"
#include "launch/agents.h"
#include "launch/process.h"

namespace helium::report {
namespace {

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// Lower-case [a-z0-9.-], runs of anything else one '-', at most 64 characters.
std::string slug(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '.') out += static_cast<char>(std::tolower(u));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 64) out.resize(64);
  return out.empty() ? "unknown" : out;
}

std::string json_string(const OrderedJson& j, const char* a, const char* b) {
  if (j.contains(a) && j[a].is_object() && j[a].contains(b) && j[a][b].is_string()) return j[a][b].get<std::string>();
  return "";
}

}  // namespace

std::string community_repo() {
  const char* repo = std::getenv("HELIUM_BENCH_REPO");
  return repo != nullptr && *repo != '\0' ? std::string(repo) : std::string(kCommunityRepo);
}

MachineFacts MachineFacts::of_this_machine() {
  MachineFacts m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) m.cpu_model = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  m.logical_cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  struct sysinfo info {};
  if (::sysinfo(&info) == 0) m.memory_gib = static_cast<double>(info.totalram) * info.mem_unit / (1024.0 * 1024 * 1024);
  struct utsname names {};
  if (::uname(&names) == 0) {
    std::string release = names.release;  // "6.1.0-18-amd64": the first two numbers only
    const size_t first = release.find('.');
    const size_t second = first == std::string::npos ? std::string::npos : release.find_first_not_of("0123456789", first + 1);
    m.os = std::string(names.sysname) + " " + release.substr(0, second) + " " + names.machine;
  }
  return m;
}

OrderedJson make_payload(const OrderedJson& result, const MachineFacts& machine, const std::string& helium_version,
                         const std::string& date) {
  OrderedJson payload = {{"schema", "helium-bench/1"}, {"helium", helium_version}, {"date", date}};
  payload["machine"] = {{"cpu", machine.cpu_model},
                        {"logical_cpus", machine.logical_cpus},
                        {"memory_gib", std::round(machine.memory_gib)},
                        {"os", machine.os}};
  for (auto it = result.begin(); it != result.end(); ++it) payload[it.key()] = it.value();
  return payload;
}

Status check_payload_is_anonymous(const std::string& text) {
  std::map<std::string, std::string> private_names;
  for (const char* variable : {"USER", "LOGNAME", "HOME"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && std::string_view(value).size() >= 3 && std::string_view(value) != "root" &&
        std::string_view(value) != "/root")
      private_names[variable] = value;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && std::string_view(host).size() >= 3) private_names["the host name"] = host;
  for (const auto& [what, value] : private_names)
    if (text.find(value) != std::string::npos)
      return Status::error("the payload contains " + what + " (\"" + value + "\"); it is not submitted");
  if (text.find("/home/") != std::string::npos || text.find("/Users/") != std::string::npos)
    return Status::error("the payload contains a home directory path; it is not submitted");
  return Status::ok();
}

std::string payload_path(const OrderedJson& payload) {
  Sha256 sha;
  sha.update(payload.dump());
  std::string device = json_string(payload, "device", "name");
  std::string model = json_string(payload, "model", "name");
  const std::string date = payload.value("date", std::string("undated"));
  return "results/" + slug(device) + "/" + slug(model) + "/" + slug(date) + "-" + sha.hex_digest().substr(0, 8) + ".json";
}

Submission plan_submission(const OrderedJson& payload, const std::string& repo) {
  Submission s;
  s.repo = repo;
  s.path = payload_path(payload);
  const std::string stem = std::filesystem::path(s.path).stem().string();
  s.branch = "bench-" + stem;
  const std::string device = json_string(payload, "device", "name");
  const std::string model = json_string(payload, "model", "name");
  s.title = "bench: " + model + " on " + device;
  s.content = payload.dump(2) + "\n";
  s.body = "A `helium bench` result, submitted by `helium bench --submit`.\n\n```json\n" + s.content + "```\n";
  const std::string name = repo.substr(repo.find('/') + 1);
  const std::string fork = "<login>/" + name;
  s.steps = {
      {{"gh", "auth", "status"}, "", "check that gh is logged in to GitHub"},
      {{"gh", "api", "user", "--jq", ".login"}, "login", "the GitHub account the pull request comes from"},
      {{"gh", "repo", "fork", repo, "--clone=false", "--default-branch-only"}, "", "fork the table (an existing fork is reused)"},
      {{"gh", "api", "repos/" + repo, "--jq", ".default_branch"}, "base", "the table's default branch"},
      {{"gh", "api", "repos/" + fork + "/git/ref/heads/<base>", "--jq", ".object.sha"}, "sha", "the fork's head"},
      {{"gh", "api", "-X", "POST", "repos/" + fork + "/git/refs", "-f", "ref=refs/heads/" + s.branch, "-f", "sha=<sha>"},
       "", "a branch for this result"},
      {{"gh", "api", "-X", "PUT", "repos/" + fork + "/contents/" + s.path, "-f", "message=" + s.title, "-f",
        "content=" + base64(s.content), "-f", "branch=" + s.branch},
       "", "add the result's file"},
      {{"gh", "pr", "create", "--repo", repo, "--base", "<base>", "--head", "<login>:" + s.branch, "--title", s.title,
        "--body", s.body},
       "url", "open the pull request"},
  };
  return s;
}

std::string describe_submission(const Submission& s) {
  std::string out = "# the file " + s.path + " in " + s.repo + ":\n" + s.content + "# the commands (gh):\n";
  for (const GhStep& step : s.steps) {
    out += "# " + step.purpose + "\n";
    for (size_t i = 0; i < step.argv.size(); ++i) {
      if (i > 0) out += " ";
      std::string arg = step.argv[i];
      if (arg.rfind("content=", 0) == 0) arg = "content=<the file above, base64>";
      if (arg.rfind("--body", 0) != 0 && i > 0 && step.argv[i - 1] == "--body") arg = "<the body: a line and the file above>";
      out += launch::shell_quote(arg);
    }
    out += "\n";
  }
  return out;
}

Result<std::string> submit(const Submission& s, const std::filesystem::path& gh) {
  std::map<std::string, std::string> values;
  std::string url;
  for (const GhStep& step : s.steps) {
    std::vector<std::string> argv = step.argv;
    for (std::string& arg : argv)
      for (const auto& [name, value] : values)
        for (size_t at = arg.find("<" + name + ">"); at != std::string::npos; at = arg.find("<" + name + ">", at + value.size()))
          arg.replace(at, name.size() + 2, value);
    HELIUM_ASSIGN_OR_RETURN(launch::CapturedRun run, launch::run_captured(gh, argv));
    if (run.exit_code != 0) {
      std::string message = "gh failed to " + step.purpose + " (exit " + std::to_string(run.exit_code) + ")";
      const std::string said = run.err.empty() ? run.out : run.err;
      if (!said.empty()) message += ": " + said.substr(0, said.find_last_not_of("\n") + 1);
      if (step.argv[1] == "auth") message += "; log in with `gh auth login` and run `helium bench --submit` again";
      return Status::error(message);
    }
    std::string printed = run.out;
    while (!printed.empty() && (printed.back() == '\n' || printed.back() == ' ')) printed.pop_back();
    if (!step.captures.empty()) {
      if (printed.empty()) return Status::error("gh printed nothing for " + step.purpose);
      values[step.captures] = printed;
    }
    if (step.captures == "url") url = printed;
  }
  return url;
}

}  // namespace helium::report
