// hub/progress.h — the download progress display: a bar redrawn in place (bytes, rate, ETA) when the
// output is a terminal, plain lines otherwise (a log file or a CI console gets one line every few seconds
// and one per finished file, never carriage returns).
// Owns: formatting and the redraw thread. Must not: know what is being downloaded beyond names and sizes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace helium {

// "1.50 GB", "512.0 MB", "17 B": decimal units, as download sizes are quoted on the Hub.
std::string format_bytes(double bytes);
// "32,768": an integer with thousands separators.
std::string with_commas(int64_t n);
// "3m07s", "1h02m", "42s"; "?" when unknown (negative).
std::string format_duration(double seconds);
// One progress line: "[#####-----] 1.50 GB / 3.00 GB  50%  120.0 MB/s  ETA 12s" (bar only when bar_width >
// 0).
std::string format_progress(int64_t done, int64_t total, double bytes_per_second, int bar_width);

class DownloadProgress {
 public:
  // `out` may be nullptr (silent). `interactive`: redraw one line in place (a TTY); else plain lines every
  // `plain_interval_s` seconds.
  DownloadProgress(FILE* out, bool interactive, int64_t total_bytes, double plain_interval_s = 5.0);
  ~DownloadProgress();
  DownloadProgress(const DownloadProgress&) = delete;
  DownloadProgress& operator=(const DownloadProgress&) = delete;

  void add_bytes(int64_t bytes) { done_.fetch_add(bytes, std::memory_order_relaxed); }  // any thread
  void file_done(const std::string& path, int64_t bytes);                               // any thread
  void note(const std::string& message);                                                // any thread
  // Stops the redraw thread and prints the final line (total, average rate, time).
  void finish();

 private:
  void run();
  void print_line_locked(bool final_line);
  FILE* out_;
  bool interactive_;
  int64_t total_;
  double interval_s_;
  std::atomic<int64_t> done_{0};
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool finished_ = false;
  bool line_open_ = false;  // an interactive line is on screen without its newline
  // For the rate: an exponential average over the last few seconds rather than since the start.
  double rate_ = 0;
  int64_t last_done_ = 0;
  std::chrono::steady_clock::time_point last_time_ = start_;
  std::thread thread_;
};

}  // namespace helium
