// hub/settings.h — where the Hugging Face Hub is and where its files are cached, read from the same
// environment variables huggingface_hub reads, so helium and the Python tools share one cache and one login.
// Owns: HubSettings and its environment rules. Must not: touch the network or the file system beyond
// reading the token file.
#pragma once

#include <functional>
#include <string>

namespace helium {

struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT, without a trailing '/'
  std::string cache_dir;  // HF_HUB_CACHE, else $HF_HOME/hub; HF_HOME defaults to ~/.cache/huggingface
  std::string token;      // HF_TOKEN, else the token file ($HF_TOKEN_PATH, else $HF_HOME/token); may be empty
  bool offline = false;   // HF_HUB_OFFLINE=1 (or --offline): never touch the network
  std::string user_agent = "helium";

  // The rules, in order (as huggingface_hub applies them):
  //   HF_HOME: $HF_HOME, else $XDG_CACHE_HOME/huggingface, else $HOME/.cache/huggingface.
  //   cache_dir: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE (older name), else $HF_HOME/hub.
  //   token: $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN (older name), else the first line of the token file
  //     ($HF_TOKEN_PATH, else $HF_HOME/token, written by `hf auth login`).
  //   endpoint: $HF_ENDPOINT, default https://huggingface.co.
  //   offline: $HF_HUB_OFFLINE is one of 1, ON, YES, TRUE (any case).
  // Proxies are not settings here: libcurl reads http_proxy, https_proxy, HTTPS_PROXY, all_proxy and
  // no_proxy itself (not HTTP_PROXY in capitals, which CGI programs can be fed by a request header).
  // `getenv` is a parameter so that tests need not change the process environment.
  static HubSettings from_environment(const std::function<const char*(const char*)>& getenv);
  static HubSettings from_environment();
};

}  // namespace helium
