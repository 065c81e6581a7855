// tokenizer/tokenizer_config.h — what helium takes from tokenizer_config.json: the bos / eos token names
// and the chat template. Must not: resolve token names to ids (the tokenizer does, with its vocabulary).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace helium::tokenizer_json {

struct TokenizerConfig {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::string chat_template;  // empty when none
};

// Parses tokenizer_config.json text; empty text gives an empty config. bos_token / eos_token may be
// strings or AddedToken objects {"content": ...}; chat_template may be a string or a list of
// {"name", "template"}, of which "default" is taken (as transformers does).
Result<TokenizerConfig> parse_tokenizer_config(std::string_view text);

}  // namespace helium::tokenizer_json
