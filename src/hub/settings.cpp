// hub/settings.cpp — HubSettings from the environment (rules in settings.h).
#include "hub/settings.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

namespace helium {
namespace {

std::string non_empty(const char* value) {
  return value != nullptr ? std::string(value) : std::string();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

HubSettings HubSettings::from_environment(const std::function<const char*(const char*)>& getenv) {
  HubSettings s;
  auto env = [&](const char* name) { return non_empty(getenv(name)); };

  std::string hf_home = env("HF_HOME");
  if (hf_home.empty()) {
    std::string xdg = env("XDG_CACHE_HOME");
    if (xdg.empty()) xdg = env("HOME") + "/.cache";
    hf_home = xdg + "/huggingface";
  }
  s.cache_dir = env("HF_HUB_CACHE");
  if (s.cache_dir.empty()) s.cache_dir = env("HUGGINGFACE_HUB_CACHE");
  if (s.cache_dir.empty()) s.cache_dir = hf_home + "/hub";

  std::string endpoint = env("HF_ENDPOINT");
  if (!endpoint.empty()) s.endpoint = endpoint;
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();

  s.token = trim(env("HF_TOKEN"));
  if (s.token.empty()) s.token = trim(env("HUGGING_FACE_HUB_TOKEN"));
  if (s.token.empty()) {
    std::string path = env("HF_TOKEN_PATH");
    if (path.empty()) path = hf_home + "/token";
    std::ifstream f(path);
    std::string line;
    if (f && std::getline(f, line)) s.token = trim(line);
  }

  std::string offline = env("HF_HUB_OFFLINE");
  std::transform(offline.begin(), offline.end(), offline.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  s.offline = offline == "1" || offline == "ON" || offline == "YES" || offline == "TRUE";
  return s;
}

HubSettings HubSettings::from_environment() {
  return from_environment([](const char* name) { return std::getenv(name); });
}

}  // namespace helium
