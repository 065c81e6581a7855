// hub/progress.cpp — progress lines for downloads (see progress.h).
#include "hub/progress.h"

#include <algorithm>
#include <cmath>

namespace helium {

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(s[i]);
  }
  return out;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, bytes >= 100 ? "%.1f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

std::string format_duration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "?";
  const long long s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  return buf;
}

std::string format_progress(int64_t done, int64_t total, double bytes_per_second, int bar_width) {
  std::string line;
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  if (bar_width > 0) {
    const int filled = static_cast<int>(fraction * bar_width);
    line.push_back('[');  // appended piecewise: g++ 12 -O3 warns falsely (-Wrestrict) on "[" + std::string
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(bar_width - filled), '-');
    line.append("] ");
  }
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3.0f%%", fraction * 100);
  line +=
      format_bytes(static_cast<double>(done)) + " / " + format_bytes(static_cast<double>(total)) + "  " + pct;
  line += "  " + format_bytes(bytes_per_second) + "/s";
  const double eta = bytes_per_second > 0 ? static_cast<double>(total - done) / bytes_per_second : -1;
  line += "  ETA " + format_duration(done >= total ? 0 : eta);
  return line;
}

DownloadProgress::DownloadProgress(FILE* out, bool interactive, int64_t total_bytes, double plain_interval_s)
    : out_(out), interactive_(interactive), total_(total_bytes), interval_s_(plain_interval_s) {
  if (out_ != nullptr) thread_ = std::thread([this] { run(); });
}

DownloadProgress::~DownloadProgress() {
  finish();
}

void DownloadProgress::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto period = interactive_ ? std::chrono::milliseconds(200)
                                   : std::chrono::milliseconds(static_cast<int64_t>(interval_s_ * 1000));
  while (!stopping_) {
    wake_.wait_for(lock, period, [&] { return stopping_; });
    if (stopping_) break;
    if (total_ > 0 || done_.load(std::memory_order_relaxed) > 0) print_line_locked(false);
  }
}

void DownloadProgress::print_line_locked(bool final_line) {
  const auto now = std::chrono::steady_clock::now();
  const int64_t done = done_.load(std::memory_order_relaxed);
  const double dt = std::chrono::duration<double>(now - last_time_).count();
  if (dt > 0.05) {
    const double instant = static_cast<double>(done - last_done_) / dt;
    rate_ = rate_ == 0 ? instant : 0.7 * rate_ + 0.3 * instant;
    last_done_ = done;
    last_time_ = now;
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (final_line) {
    const double average = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
    std::string line = "downloaded " + format_bytes(static_cast<double>(done)) + " in " +
                       format_duration(elapsed) + " (" + format_bytes(average) + "/s)";
    std::fprintf(out_, interactive_ ? "\r\033[K%s\n" : "%s\n", line.c_str());
  } else if (interactive_) {
    std::fprintf(out_, "\r\033[K%s", format_progress(done, total_, rate_, 30).c_str());
    line_open_ = true;
  } else {
    std::fprintf(out_, "%s\n", format_progress(done, total_, rate_, 0).c_str());
  }
  std::fflush(out_);
}

void DownloadProgress::file_done(const std::string& path, int64_t bytes) {
  if (out_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (interactive_ && line_open_) std::fprintf(out_, "\r\033[K");
  line_open_ = false;
  std::fprintf(out_, "  %s (%s) done\n", path.c_str(), format_bytes(static_cast<double>(bytes)).c_str());
  std::fflush(out_);
}

void DownloadProgress::note(const std::string& message) {
  if (out_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (interactive_ && line_open_) std::fprintf(out_, "\r\033[K");
  line_open_ = false;
  std::fprintf(out_, "  %s\n", message.c_str());
  std::fflush(out_);
}

void DownloadProgress::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    finished_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (out_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (total_ > 0 || done_.load() > 0) print_line_locked(true);  // nothing to report when all was cached
}

}  // namespace helium
