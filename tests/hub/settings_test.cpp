// HubSettings from the environment: the rules huggingface_hub applies, read through a fake getenv.
#include "hub/settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

namespace helium {
namespace {

HubSettings settings_with(const std::map<std::string, std::string>& env) {
  return HubSettings::from_environment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(HubSettings, Defaults) {
  HubSettings s = settings_with({{"HOME", "/home/u"}});
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_EQ(s.cache_dir, "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(s.token, "");
  EXPECT_FALSE(s.offline);
}

TEST(HubSettings, HomeCacheEndpointAndOffline) {
  EXPECT_EQ(settings_with({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}}).cache_dir, "/x/huggingface/hub");
  EXPECT_EQ(settings_with({{"HOME", "/h"}, {"HF_HOME", "/hf"}}).cache_dir, "/hf/hub");
  EXPECT_EQ(settings_with({{"HF_HOME", "/hf"}, {"HF_HUB_CACHE", "/cache"}}).cache_dir, "/cache");
  EXPECT_EQ(settings_with({{"HF_HOME", "/hf"}, {"HUGGINGFACE_HUB_CACHE", "/old"}}).cache_dir, "/old");
  EXPECT_EQ(settings_with({{"HF_ENDPOINT", "https://hf-mirror.example/"}}).endpoint,
            "https://hf-mirror.example");
  for (const char* on : {"1", "ON", "yes", "True"})
    EXPECT_TRUE(settings_with({{"HF_HUB_OFFLINE", on}}).offline) << on;
  for (const char* off : {"0", "", "no", "false"})
    EXPECT_FALSE(settings_with({{"HF_HUB_OFFLINE", off}}).offline) << off;
}

TEST(HubSettings, TokenFromEnvironmentThenTokenFile) {
  EXPECT_EQ(settings_with({{"HF_TOKEN", " hf_abc \n"}}).token, "hf_abc");
  EXPECT_EQ(settings_with({{"HUGGING_FACE_HUB_TOKEN", "hf_old"}}).token, "hf_old");
  const std::string home = ::testing::TempDir() + "hf_home_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + home).c_str()), 0);
  FILE* f = std::fopen((home + "/token").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("hf_from_file\n", f);
  std::fclose(f);
  EXPECT_EQ(settings_with({{"HF_HOME", home}}).token, "hf_from_file");
  EXPECT_EQ(settings_with({{"HF_HOME", home}, {"HF_TOKEN", "hf_env"}}).token, "hf_env");
  EXPECT_EQ(settings_with({{"HF_HOME", "/nonexistent"}, {"HF_TOKEN_PATH", home + "/token"}}).token,
            "hf_from_file");
  std::remove((home + "/token").c_str());
  ::rmdir(home.c_str());
}

}  // namespace
}  // namespace helium
