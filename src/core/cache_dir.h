// core/cache_dir.h — where helium keeps what it writes for itself (the GPU kernel tuning cache, the agent
// launchers' files and server logs): one rule for all of them.
#pragma once

#include <string>

namespace helium {

// $HELIUM_CACHE_DIR, else $HOME/.cache/helium, else /tmp/helium-cache. Not created here.
std::string helium_cache_dir();

}  // namespace helium
