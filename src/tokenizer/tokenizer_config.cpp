// tokenizer/tokenizer_config.cpp — tokenizer_config.json (see tokenizer_config.h).
#include "tokenizer/tokenizer_config.h"

#include "tokenizer/json_fields.h"

namespace helium::tokenizer_json {

namespace {

using json_fields::Json;

Result<std::optional<std::string>> special_token_name(const Json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    HELIUM_ASSIGN_OR_RETURN(std::string content, json_fields::required_string(*it, "content", key));
    return std::optional<std::string>(std::move(content));
  }
  return Status::error(std::string(key) + " must be a string or an object with \"content\"");
}

}  // namespace

Result<TokenizerConfig> parse_tokenizer_config(std::string_view text) {
  TokenizerConfig config;
  if (text.empty()) return config;
  HELIUM_ASSIGN_OR_RETURN(const Json json, json_fields::parse_json_text(text));
  if (!json.is_object()) return Status::error("the top level must be an object");
  HELIUM_ASSIGN_OR_RETURN(config.bos_token, special_token_name(json, "bos_token"));
  HELIUM_ASSIGN_OR_RETURN(config.eos_token, special_token_name(json, "eos_token"));
  const auto chat_template = json.find("chat_template");
  if (chat_template == json.end() || chat_template->is_null()) return config;
  if (chat_template->is_string()) {
    config.chat_template = chat_template->get<std::string>();
    return config;
  }
  if (!chat_template->is_array()) {
    return Status::error("chat_template must be a string or a list of templates");
  }
  for (const Json& entry : *chat_template) {
    if (!entry.is_object()) {
      return Status::error("chat_template entries must be {\"name\", \"template\"} objects");
    }
    HELIUM_ASSIGN_OR_RETURN(const std::string name,
                            json_fields::required_string(entry, "name", "chat_template[]"));
    if (name != "default") continue;
    HELIUM_ASSIGN_OR_RETURN(config.chat_template,
                            json_fields::required_string(entry, "template", "chat_template[]"));
  }
  return config;
}

}  // namespace helium::tokenizer_json
