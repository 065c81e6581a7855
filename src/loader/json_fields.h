// loader/json_fields.h — internal to loader/: parsing JSON text into values with errors as values,
// quoting untrusted names for messages, and the config helpers that load_checkpoint shares.
// Not part of the loader's interface (checkpoint.h is).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "loader/checkpoint.h"

namespace helium::loader_detail {

// Parses `text` as JSON. On failure the message is "<origin>: invalid JSON: <parser message with the
// line and column>". Never throws.
Result<nlohmann::json> parse_json_text(std::string_view text, const std::string& origin);

// The parser's message without nlohmann's "[json.exception.parse_error.101] " tag.
std::string json_error_text(const std::exception& e);

// A name from an untrusted file, quoted for a message: control and non-ASCII bytes are escaped as \xNN
// and very long names are cut, so that a corrupt header cannot flood a log or a terminal.
std::string quote(std::string_view name);

// config.json (already parsed, as written) -> the text model's config; see parse_text_config.
Result<nlohmann::json> resolve_text_config(const nlohmann::json& full, const std::string& origin);

// Reads eos_token_id / bos_token_id / pad_token_id of `obj` into `out` where present (config.json and
// generation_config.json spell them the same way); errors name the key and `origin`.
Status read_special_tokens(const nlohmann::json& obj, const std::string& origin, GenerationConfig& out);

}  // namespace helium::loader_detail
