// launch/process.cpp — posix_spawn, signals and file writes for a launch.
#include "launch/process.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <random>
#include <vector>

extern char** environ;

namespace helium::launch {

Result<std::filesystem::path> find_executable(std::string_view name, std::string_view path_variable) {
  if (name.empty()) return Status::error("no program named");
  auto executable = [](const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string_view::npos) {
    if (executable(std::filesystem::path(name))) return std::filesystem::path(name);
    return Status::error(std::string(name) + " is not an executable file");
  }
  size_t start = 0;
  while (start <= path_variable.size()) {
    size_t end = path_variable.find(':', start);
    if (end == std::string_view::npos) end = path_variable.size();
    const std::string_view dir = path_variable.substr(start, end - start);
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : std::string(dir)) / name;
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  return Status::error(std::string(name) + " was not found on PATH");
}

Status write_plan_files(const LaunchPlan& plan) {
  for (const FileToWrite& file : plan.files) {
    std::error_code ec;
    std::filesystem::create_directories(file.path.parent_path(), ec);
    if (ec) return Status::error(file.path.parent_path().string() + ": cannot be created: " + ec.message());
    const std::filesystem::path temporary = file.path.string() + ".helium-" + std::to_string(::getpid());
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out << file.content;
      out.close();
      if (!out) {
        std::filesystem::remove(temporary, ec);
        return Status::error(temporary.string() + ": cannot be written");
      }
    }
    struct stat old {};
    if (::stat(file.path.c_str(), &old) == 0) ::chmod(temporary.c_str(), old.st_mode & 07777);
    std::filesystem::rename(temporary, file.path, ec);
    if (ec) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      return Status::error(file.path.string() + ": cannot be replaced: " + ec.message());
    }
  }
  return Status::ok();
}

std::string random_api_key() {
  std::random_device source;  // /dev/urandom on Linux
  std::string key;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) key += kHex[source() & 15u];
  return key;
}

LaunchSignals::LaunchSignals() {
  sigemptyset(&set_);
  for (int s : {SIGINT, SIGQUIT, SIGTERM, SIGHUP}) sigaddset(&set_, s);
  pthread_sigmask(SIG_BLOCK, &set_, &previous_);
}

LaunchSignals::~LaunchSignals() {
  // Signals that arrived while blocked and were not read are dropped, not delivered on unblocking.
  timespec none{0, 0};
  while (sigtimedwait(&set_, nullptr, &none) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

Result<int> run_in_foreground(const std::filesystem::path& binary, const LaunchPlan& plan, const LaunchSignals& signals) {
  // The environment: the process's own, with the plan's variables replacing any of the same name.
  std::map<std::string, std::string> overrides(plan.env.begin(), plan.env.end());
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string name(entry.substr(0, entry.find('=')));
    if (!overrides.contains(name)) env_strings.emplace_back(entry);
  }
  for (const auto& [name, value] : overrides) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = plan.argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  // The agent starts with the default disposition and an empty mask for the signals helium holds.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attributes, &empty);
  posix_spawnattr_setsigdefault(&attributes, &signals.set());
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, binary.c_str(), nullptr, &attributes, argv.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) return Status::error(binary.string() + ": cannot be started: " + std::strerror(spawned));

  for (;;) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;
    }
    if (done < 0 && errno != EINTR) return Status::error(std::string("waiting for the agent failed: ") + std::strerror(errno));
    timespec tick{0, 50'000'000};
    const int signal = sigtimedwait(&signals.set(), nullptr, &tick);
    if (signal == SIGTERM || signal == SIGHUP) ::kill(child, signal);
    // SIGINT / SIGQUIT: the terminal delivered them to the agent as well; they are its to handle.
  }
}

}  // namespace helium::launch
