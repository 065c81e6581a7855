// tests/server/serve_cli_test.cpp — `helium serve` as a user runs it: it prints where it listens,
// answers /health and a chat request, and on SIGTERM / SIGINT stops accepting, ends the stream in
// flight and exits 0. A port that is taken is a clear error and exit 1.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A `helium serve` child process with its stderr in a file.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& extra_args) {
    stderr_path_ = (std::filesystem::temp_directory_path() /
                    ("helium_serve_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++) + ".err"))
                       .string();
    pid_ = ::fork();
    if (pid_ == 0) {
      std::FILE* err = std::freopen(stderr_path_.c_str(), "w", stderr);
      (void)err;
      std::vector<std::string> args = {HELIUM_BINARY, "serve", "--device", "cpu", "-t", "2"};
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(stderr_path_);
  }
  // Waits for the "serving ... on http://host:port" banner; returns the port, or -1.
  int wait_for_port(std::chrono::seconds timeout = 60s) {
    const std::regex banner(R"(on http://[^:]+:(\d+))");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string err = read_file(stderr_path_);
      if (std::regex_search(err, m, banner)) return std::stoi(m[1].str());
      if (has_exited()) return -1;
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }
  bool has_exited() {
    if (exited_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = status;
    }
    return exited_;
  }
  // Waits for the exit; returns the exit code, or -1 when it did not exit normally in time.
  int wait_exit(std::chrono::seconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!has_exited() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    if (!exited_ || !WIFEXITED(status_)) return -1;
    return WEXITSTATUS(status_);
  }
  void signal(int sig) { ::kill(pid_, sig); }
  std::string stderr_text() const { return read_file(stderr_path_); }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string stderr_path_;
};

TEST(ServeCli, ServesAndStopsCleanlyOnSigterm) {
  ServeProcess serve({"--port", "0", "--alias", "tiny"});
  const int port = serve.wait_for_port();
  ASSERT_GT(port, 0) << serve.stderr_text();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_NE(health->body.find("\"model\":\"tiny\""), std::string::npos) << health->body;
  auto chat = client.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3})",
                          "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 200) << chat->body;

  // A long stream in flight when the signal comes: it ends, and the process exits 0.
  std::string streamed;
  std::atomic<bool> started{false};
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = R"({"prompt":"def main():","max_tokens":1800,"stream":true,"logit_bias":{"0":-100,"2":-100}})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      streamed.append(data, n);
      if (streamed.find("data: ") != std::string::npos) started = true;
      return true;
    };
    c.send(req);
  });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!started && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(started) << serve.stderr_text();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.stderr_text();
  reader.join();
  const std::string err = serve.stderr_text();
  EXPECT_NE(err.find("helium: stopped"), std::string::npos) << err;
  // One JSON log line per request on stderr.
  EXPECT_NE(err.find(R"("path":"/health","status":200)"), std::string::npos) << err;
  EXPECT_NE(err.find(R"("path":"/v1/chat/completions","status":200)"), std::string::npos) << err;
}

TEST(ServeCli, SigintWhileIdleExitsZero) {
  ServeProcess serve({"--port", "0"});
  ASSERT_GT(serve.wait_for_port(), 0) << serve.stderr_text();
  serve.signal(SIGINT);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.stderr_text();
}

TEST(ServeCli, APortInUseIsAClearError) {
  ServeProcess first({"--port", "0"});
  const int port = first.wait_for_port();
  ASSERT_GT(port, 0) << first.stderr_text();
  ServeProcess second({"--port", std::to_string(port)});
  EXPECT_EQ(second.wait_exit(), 1) << second.stderr_text();
  EXPECT_NE(second.stderr_text().find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << second.stderr_text();
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait_exit(), 0);
}

}  // namespace
