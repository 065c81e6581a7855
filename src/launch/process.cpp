// launch/process.cpp — posix_spawn, signals and file writes for a launch.
#include "launch/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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

namespace {

// The termination signal helium received while an agent ran (0: none); set by the handler, read by the
// wait loop.
volatile sig_atomic_t g_forwarded_signal = 0;
void remember_signal(int signal) { g_forwarded_signal = signal; }

// The dispositions of the four terminal signals while an agent runs, and back afterwards.
class ForegroundSignals {
 public:
  ForegroundSignals() {
    g_forwarded_signal = 0;
    struct sigaction ignore {}, forward {};
    ignore.sa_handler = SIG_IGN;
    forward.sa_handler = remember_signal;
    sigemptyset(&forward.sa_mask);
    for (int i = 0; i < 4; ++i) sigaction(kSignals[i], i < 2 ? &ignore : &forward, &previous_[i]);
  }
  ~ForegroundSignals() {
    for (int i = 0; i < 4; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  ForegroundSignals(const ForegroundSignals&) = delete;
  ForegroundSignals& operator=(const ForegroundSignals&) = delete;
  static constexpr int kSignals[4] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};

 private:
  struct sigaction previous_[4];
};

}  // namespace

Result<int> run_in_foreground(const std::filesystem::path& binary, const LaunchPlan& plan) {
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

  ForegroundSignals signals;
  // The agent starts with the default dispositions (an ignored signal would stay ignored across exec) and
  // nothing blocked.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  for (int s : ForegroundSignals::kSignals) sigaddset(&defaults, s);
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attributes, &empty);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
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
    if (const int signal = g_forwarded_signal; signal != 0) {
      g_forwarded_signal = 0;
      ::kill(child, signal);
    }
    timespec tick{0, 20'000'000};
    nanosleep(&tick, nullptr);
  }
}

Result<CapturedRun> run_captured(const std::filesystem::path& binary, const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return Status::error(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());
  arg_pointers.push_back(nullptr);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, binary.c_str(), &actions, nullptr, arg_pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return Status::error(binary.string() + ": cannot be started: " + std::strerror(spawned));
  }
  CapturedRun run;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open = 2;
  char buffer[4096];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  return run;
}

}  // namespace helium::launch
