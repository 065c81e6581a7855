#include "models/config_reader.h"

namespace helium {

const nlohmann::json* ConfigReader::find(const std::string& key) const {
  auto it = config_.find(key);
  if (it == config_.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<int64_t> ConfigReader::integer(const std::string& key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return error("missing key '" + key + "'");
  if (!v->is_number_integer()) return error("key '" + key + "' must be an integer, got " + v->dump());
  return v->get<int64_t>();
}

int64_t ConfigReader::integer_or(const std::string& key, int64_t fallback) const {
  const nlohmann::json* v = find(key);
  return (v != nullptr && v->is_number_integer()) ? v->get<int64_t>() : fallback;
}

Result<double> ConfigReader::number(const std::string& key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return error("missing key '" + key + "'");
  if (!v->is_number()) return error("key '" + key + "' must be a number, got " + v->dump());
  return v->get<double>();
}

double ConfigReader::number_or(const std::string& key, double fallback) const {
  const nlohmann::json* v = find(key);
  return (v != nullptr && v->is_number()) ? v->get<double>() : fallback;
}

bool ConfigReader::boolean_or(const std::string& key, bool fallback) const {
  const nlohmann::json* v = find(key);
  return (v != nullptr && v->is_boolean()) ? v->get<bool>() : fallback;
}

}  // namespace helium
