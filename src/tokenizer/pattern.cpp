// tokenizer/pattern.cpp — tokenizer.json pattern objects (see pattern.h).
#include "tokenizer/pattern.h"

namespace helium::tokenizer_json {

Result<Regex> parse_pattern(const json_fields::Json& node, std::string_view where) {
  const std::string field = std::string(where) + ".pattern";
  if (!node.is_object()) return Status::error(field + " must be an object with \"String\" or \"Regex\"");
  if (const auto it = node.find("String"); it != node.end() && it->is_string()) {
    return Regex::literal(it->get<std::string>());
  }
  if (const auto it = node.find("Regex"); it != node.end() && it->is_string()) {
    Result<Regex> regex = Regex::from_oniguruma(it->get<std::string>());
    if (!regex.is_ok()) return regex.status().with_context(field);
    return regex;
  }
  return Status::error(field + " must be an object with \"String\" or \"Regex\"");
}

std::string replace_all(const Regex& pattern, std::string_view text, std::string_view content) {
  const auto matches = pattern.find_all(text);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t done = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text.substr(done, begin - done));
    out.append(content);
    done = end;
  }
  out.append(text.substr(done));
  return out;
}

}  // namespace helium::tokenizer_json
