// tokenizer/json_fields.cpp — typed field reads (see json_fields.h).
#include "tokenizer/json_fields.h"

#include "tokenizer/unicode.h"

namespace helium::tokenizer_json::json_fields {

namespace {

const Json* find(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

Status type_error(std::string_view where, std::string_view key, std::string_view expected) {
  return Status::error(std::string(where) + "." + std::string(key) + " must be " + std::string(expected));
}

}  // namespace

Result<Json> parse_json_text(std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return Status::error(std::string("invalid JSON: ") + e.what());
  }
}

Result<std::string> required_string(const Json& object, std::string_view key, std::string_view where) {
  const Json* value = find(object, key);
  if (value == nullptr) return Status::error(std::string(where) + "." + std::string(key) + " is missing");
  if (!value->is_string()) return type_error(where, key, "a string");
  return value->get<std::string>();
}

Result<std::string> string_or(const Json& object, std::string_view key, std::string fallback,
                              std::string_view where) {
  const Json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_string()) return type_error(where, key, "a string");
  return value->get<std::string>();
}

Result<bool> bool_or(const Json& object, std::string_view key, bool fallback, std::string_view where) {
  const Json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) return type_error(where, key, "true or false");
  return value->get<bool>();
}

Result<int64_t> int_or(const Json& object, std::string_view key, int64_t fallback, std::string_view where) {
  const Json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_number_integer()) return type_error(where, key, "an integer");
  return value->get<int64_t>();
}

Result<char32_t> char_or(const Json& object, std::string_view key, char32_t fallback,
                         std::string_view where) {
  const Json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_string()) return type_error(where, key, "a one-character string");
  const auto& text = value->get_ref<const std::string&>();
  if (text.empty() || !unicode::is_valid_utf8(text)) return type_error(where, key, "a one-character string");
  size_t pos = 0;
  const char32_t cp = unicode::decode_next(text, pos);
  if (pos != text.size()) return type_error(where, key, "a one-character string");
  return cp;
}

Result<std::string> component_type(const Json& node, std::string_view where) {
  if (!node.is_object()) return Status::error(std::string(where) + " must be an object");
  return required_string(node, "type", where);
}

}  // namespace helium::tokenizer_json::json_fields
