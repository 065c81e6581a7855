// tokenizer/json_fields.h — typed reads of tokenizer.json / tokenizer_config.json fields.
// Owns: turning a missing or mistyped field into an error that names the field. Must not: know what the
// fields mean.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace helium::tokenizer_json::json_fields {

using Json = nlohmann::json;

// Parses JSON text; a syntax error becomes an error value ("invalid JSON: ...") instead of an exception.
Result<Json> parse_json_text(std::string_view text);

// `where` names the object being read (e.g. "pre_tokenizer"); errors read "<where>.<key> must be ...".

// A required string field.
Result<std::string> required_string(const Json& object, std::string_view key, std::string_view where);
// An optional string field: `fallback` when missing or null.
Result<std::string> string_or(const Json& object, std::string_view key, std::string fallback,
                              std::string_view where);
// An optional boolean field: `fallback` when missing or null.
Result<bool> bool_or(const Json& object, std::string_view key, bool fallback, std::string_view where);
// An optional integer field: `fallback` when missing or null.
Result<int64_t> int_or(const Json& object, std::string_view key, int64_t fallback, std::string_view where);
// A field that is a single character (Metaspace's replacement, Strip's content).
Result<char32_t> char_or(const Json& object, std::string_view key, char32_t fallback, std::string_view where);

// The "type" of a component object; an error when `node` is not an object or has no string "type".
Result<std::string> component_type(const Json& node, std::string_view where);

}  // namespace helium::tokenizer_json::json_fields
