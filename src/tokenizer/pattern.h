// tokenizer/pattern.h — the {"String": ...} / {"Regex": ...} pattern objects of tokenizer.json, shared by
// the Split pre-tokenizer, the Replace normalizer and the Replace decoder.
#pragma once

#include <string_view>

#include "core/status.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"

namespace helium::tokenizer_json {

Result<Regex> parse_pattern(const json_fields::Json& node, std::string_view where);

// `text` with every match of `pattern` replaced by `content`.
std::string replace_all(const Regex& pattern, std::string_view text, std::string_view content);

}  // namespace helium::tokenizer_json
