#include "loader/json_fields.h"

#include <cstdio>
#include <exception>

namespace helium::loader_detail {

std::string json_error_text(const std::exception& e) {
  std::string what = e.what();
  // nlohmann prefixes every message with "[json.exception.<kind>.<id>] "; the rest is the useful part.
  if (what.rfind("[json.exception.", 0) == 0) {
    size_t close = what.find("] ");
    if (close != std::string::npos) what.erase(0, close + 2);
  }
  return what;
}

Result<nlohmann::json> parse_json_text(std::string_view text, const std::string& origin) {
  // The parser takes a NUL as the end of its input and would ignore whatever follows it.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos)
    return Status::error(origin + ": invalid JSON: NUL byte at offset " + std::to_string(nul));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return Status::error(origin + ": invalid JSON: " + json_error_text(e));
  } catch (const std::exception& e) {  // e.g. bad_alloc on a huge document
    return Status::error(origin + ": cannot parse JSON: " + e.what());
  }
}

std::string quote(std::string_view name) {
  constexpr size_t kMaxShown = 200;
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > kMaxShown) out += "...(" + std::to_string(name.size()) + " bytes)";
  return out + "'";
}

}  // namespace helium::loader_detail
