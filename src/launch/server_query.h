// launch/server_query.h — the endpoint of a server that is already running (`helium claude --url ...`):
// which model it serves and its context, from its GET /v1/models.
// Owns: that one request and reading its reply. Must not: start or stop servers.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "launch/agents.h"

namespace helium::launch {

// Asks `base_url` (http://host:port, with or without a trailing /v1) for its models. `model`: the one to
// use (empty: the first listed); `context_tokens`: the window to tell the agent (0: the model's
// `context_length` from the list, which helium's server reports). Fails with the reason when the server
// cannot be reached, refuses the key, lists no such model, or gives no context and none was given.
Result<Endpoint> query_server(const std::string& base_url, const std::string& api_key, const std::string& model,
                              int64_t context_tokens);

}  // namespace helium::launch
