// Progress display: the line's numbers (bytes, percent, rate, ETA), a bar redrawn in place for a terminal,
// plain lines otherwise.
#include "hub/progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace helium {
namespace {

TEST(Progress, Formatting) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(999), "999 B");
  EXPECT_EQ(format_bytes(1500), "1.50 kB");
  EXPECT_EQ(format_bytes(71.9e9), "71.90 GB");
  EXPECT_EQ(format_bytes(250.2e9), "250.2 GB");
  EXPECT_EQ(format_duration(42), "42s");
  EXPECT_EQ(format_duration(187), "3m07s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
  // Half of 3 GB at 120 MB/s: 12.5 s left.
  EXPECT_EQ(format_progress(1'500'000'000, 3'000'000'000, 120e6, 10),
            "[#####-----] 1.50 GB / 3.00 GB   50%  120.0 MB/s  ETA 13s");
  EXPECT_EQ(format_progress(1'500'000'000, 3'000'000'000, 0, 0), "1.50 GB / 3.00 GB   50%  0 B/s  ETA ?");
  EXPECT_EQ(format_progress(5, 5, 1, 0), "5 B / 5 B  100%  1 B/s  ETA 0s");
}

std::string run_display(bool interactive) {
  const std::string path =
      ::testing::TempDir() + "progress_" + std::to_string(::getpid()) + (interactive ? "_tty" : "_plain");
  FILE* out = std::fopen(path.c_str(), "w");
  {
    DownloadProgress p(out, interactive, 1000, 0.05);
    p.add_bytes(400);
    std::this_thread::sleep_for(std::chrono::milliseconds(interactive ? 450 : 150));
    p.file_done("model.safetensors", 400);
    p.add_bytes(600);
    p.finish();
  }
  std::fclose(out);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  return text;
}

TEST(Progress, TerminalRedrawsOneLinePlainOutputWritesLines) {
  const std::string tty = run_display(true);
  EXPECT_NE(tty.find("\r\033[K["), std::string::npos) << tty;  // the bar, redrawn in place
  EXPECT_NE(tty.find("400 B / 1.00 kB   40%"), std::string::npos) << tty;
  EXPECT_NE(tty.find("  model.safetensors (400 B) done\n"), std::string::npos) << tty;
  EXPECT_NE(tty.find("downloaded 1.00 kB in"), std::string::npos) << tty;
  const std::string plain = run_display(false);
  EXPECT_EQ(plain.find('\r'), std::string::npos) << plain;
  EXPECT_EQ(plain.find('['), std::string::npos) << plain;
  EXPECT_NE(plain.find("400 B / 1.00 kB   40%"), std::string::npos) << plain;
  EXPECT_NE(plain.find("downloaded 1.00 kB in"), std::string::npos) << plain;
}

}  // namespace
}  // namespace helium
