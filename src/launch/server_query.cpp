// launch/server_query.cpp — GET /v1/models over cpp-httplib.
#include "launch/server_query.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

namespace helium::launch {

Result<Endpoint> query_server(const std::string& base_url, const std::string& api_key, const std::string& model,
                              int64_t context_tokens) {
  std::string root = base_url;
  while (!root.empty() && root.back() == '/') root.pop_back();
  if (root.ends_with("/v1")) root.resize(root.size() - 3);
  if (!root.starts_with("http://"))
    return Status::error("--url must start with http:// (helium serves plain HTTP on this machine), not \"" + base_url + "\"");
  httplib::Client client(root);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  const httplib::Result reply = client.Get("/v1/models", headers);
  if (!reply) return Status::error(root + "/v1/models cannot be reached (" + httplib::to_string(reply.error()) + ")");
  if (reply->status == 401)
    return Status::error(root + " wants an API key: give it with --api-key or HELIUM_API_KEY");
  if (reply->status != 200) return Status::error(root + "/v1/models answered HTTP " + std::to_string(reply->status));
  nlohmann::json list;
  try {
    list = nlohmann::json::parse(reply->body);
  } catch (const nlohmann::json::parse_error&) {
    return Status::error(root + "/v1/models did not answer with JSON");
  }
  if (!list.is_object() || !list.contains("data") || !list["data"].is_array() || list["data"].empty())
    return Status::error(root + "/v1/models lists no model");
  const nlohmann::json* chosen = nullptr;
  std::string names;
  for (const nlohmann::json& entry : list["data"]) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_string()) continue;
    const std::string id = entry["id"].get<std::string>();
    if (!names.empty()) names += ", ";
    names += id;
    if (chosen == nullptr && (model.empty() || id == model)) chosen = &entry;
  }
  if (chosen == nullptr && model.empty()) return Status::error(root + "/v1/models lists no model with an id");
  if (chosen == nullptr)
    return Status::error(root + " does not serve \"" + model + "\"; it serves: " + (names.empty() ? "nothing" : names));
  Endpoint endpoint;
  endpoint.base_url = root;
  endpoint.api_key = api_key;
  endpoint.model = (*chosen)["id"].get<std::string>();
  endpoint.context_tokens = context_tokens;
  if (endpoint.context_tokens <= 0 && chosen->contains("context_length") && (*chosen)["context_length"].is_number_integer())
    endpoint.context_tokens = (*chosen)["context_length"].get<int64_t>();
  if (endpoint.context_tokens <= 0)
    return Status::error(root + " does not say how long its context is; give it with -c/--ctx-size");
  return endpoint;
}

}  // namespace helium::launch
