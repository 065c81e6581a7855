// server/json_fields.cpp — see json_fields.h.
#include "server/json_fields.h"

#include <cmath>

namespace helium::server {

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<Json> parse_request_json(std::string_view body) {
  if (body.empty()) return Status::error("the request body is empty; expected a JSON object");
  try {
    return Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error& e) {
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    return Status::error("the request body is not valid JSON: " + what);
  }
}

std::string field_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string path(parent);
  path += '.';
  path += key;
  return path;
}

std::string index_path(std::string_view parent, size_t index) {
  std::string path(parent);
  path += '[';
  path += std::to_string(index);
  path += ']';
  return path;
}

std::string json_type_phrase(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

const Json* FieldReader::find(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status FieldReader::missing(std::string_view key) const {
  return Status::error(std::string("`") + path(key) + "` is required");
}

Status FieldReader::wrong_type(std::string_view key, std::string_view expected) const {
  const Json* value = find(key);
  std::string got = value ? json_type_phrase(*value) : "null";
  return Status::error(std::string("`") + path(key) + "` must be " + std::string(expected) + ", not " + got);
}

Result<std::optional<std::string>> FieldReader::string(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) return wrong_type(key, "a string");
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::optional<bool>> FieldReader::boolean(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return std::optional<bool>();
  if (!v->is_boolean()) return wrong_type(key, "a boolean");
  return std::optional<bool>(v->get<bool>());
}

Result<std::optional<double>> FieldReader::number(std::string_view key, double min, double max) const {
  const Json* v = find(key);
  if (!v) return std::optional<double>();
  if (!v->is_number()) return wrong_type(key, "a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max)
    return Status::error(std::string("`") + path(key) + "` must be between " + Json(min).dump() + " and " + Json(max).dump() +
                         ", not " + v->dump());
  return std::optional<double>(x);
}

Result<std::optional<int64_t>> FieldReader::integer(std::string_view key, int64_t min, int64_t max) const {
  const Json* v = find(key);
  if (!v) return std::optional<int64_t>();
  int64_t x = 0;
  if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(max))
      return Status::error(std::string("`") + path(key) + "` must be at most " + std::to_string(max) + ", not " + v->dump());
    x = static_cast<int64_t>(u);
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9.0e15) {
    x = static_cast<int64_t>(v->get<double>());  // 16.0 is an integer to JavaScript clients
  } else {
    return wrong_type(key, "an integer");
  }
  if (x < min || x > max)
    return Status::error(std::string("`") + path(key) + "` must be between " + std::to_string(min) + " and " + std::to_string(max) +
                         ", not " + std::to_string(x));
  return std::optional<int64_t>(x);
}

Result<const Json*> FieldReader::object(std::string_view key) const {
  const Json* v = find(key);
  if (v && !v->is_object()) return wrong_type(key, "an object");
  return v;
}

Result<const Json*> FieldReader::array(std::string_view key) const {
  const Json* v = find(key);
  if (v && !v->is_array()) return wrong_type(key, "an array");
  return v;
}

}  // namespace helium::server
