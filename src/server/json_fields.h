// server/json_fields.h — typed reads of request JSON fields for the API adapters, and JSON text that
// never throws.
// Owns: the "field must be a ..." messages that name the offending field by its path (e.g.
// `messages[2].content`), so every API reports bad input the same way. Must not: know any API's
// semantics (the adapters decide which fields exist and what they mean).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace helium::server {

// Ordered: responses list their fields in the documented order, and request objects (tool schemas)
// keep the client's key order when templates print them.
using Json = nlohmann::ordered_json;

// Compact JSON text; invalid UTF-8 in strings (model output can hold any bytes) becomes U+FFFD instead
// of throwing.
std::string dump_json(const Json& value);

// Parses a request body. Errors name the byte offset and say what is wrong (nlohmann's message).
Result<Json> parse_request_json(std::string_view body);

// "a.b" or "b" when `parent` is empty; "a[3]" for indexes.
std::string field_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, size_t index);

// The JSON type name used in messages ("a string", "an array", ...).
std::string json_type_phrase(const Json& value);

// Reads of one object's fields. A missing field and an explicit null both read as absent (clients send
// null for "not set"). A present field of the wrong type, or out of range, is an error naming the path.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  // The field's value, or nullptr when absent or null.
  const Json* find(std::string_view key) const;
  std::string path(std::string_view key) const { return field_path(path_, key); }

  Result<std::optional<std::string>> string(std::string_view key) const;
  Result<std::optional<bool>> boolean(std::string_view key) const;
  Result<std::optional<double>> number(std::string_view key, double min, double max) const;
  Result<std::optional<int64_t>> integer(std::string_view key, int64_t min, int64_t max) const;
  // An object or array field (nullptr when absent).
  Result<const Json*> object(std::string_view key) const;
  Result<const Json*> array(std::string_view key) const;

  // "`path` is required" / "`path` must be ..." as a Status, for the adapters' own checks.
  Status missing(std::string_view key) const;
  Status wrong_type(std::string_view key, std::string_view expected) const;

 private:
  const Json& object_;
  std::string path_;
};

}  // namespace helium::server
