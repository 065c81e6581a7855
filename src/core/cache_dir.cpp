// core/cache_dir.cpp — see cache_dir.h.
#include "core/cache_dir.h"

#include <cstdlib>

namespace helium {

std::string helium_cache_dir() {
  if (const char* d = std::getenv("HELIUM_CACHE_DIR"); d != nullptr && *d) return d;
  if (const char* h = std::getenv("HOME"); h != nullptr && *h) return std::string(h) + "/.cache/helium";
  return "/tmp/helium-cache";
}

}  // namespace helium
