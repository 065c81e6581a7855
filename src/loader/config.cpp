// loader/config.cpp — config.json and generation_config.json.
#include <cmath>
#include <limits>
#include <string>

#include "loader/checkpoint.h"
#include "loader/json_fields.h"

namespace helium {

using loader_detail::parse_json_text;
using loader_detail::quote;
using nlohmann::json;

namespace {

// Top-level keys of a multimodal wrapper that describe its text model too, when text_config does not
// repeat them. Everything else at the top level (vision_config, image_token_index, the wrapper's
// architectures, ...) describes the wrapper and stays out of the text config. quantization_config is
// here because quantized wrappers store it only at the top level, yet it applies to the text weights.
constexpr const char* kInheritedKeys[] = {
    "tie_word_embeddings", "torch_dtype",  "dtype",        "quantization_config",
    "eos_token_id",        "bos_token_id", "pad_token_id",
};

std::string key_error(const std::string& origin, const std::string& key, const std::string& wanted,
                      const json& got) {
  return origin + ": key \"" + key + "\" must be " + wanted + ", got " +
         (got.is_number() ? got.dump() : std::string(got.type_name()));
}

// One token id; nullopt for absent/null keys.
Result<std::optional<int64_t>> integer_field(const json& obj, const char* key, const std::string& origin) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT32_MAX) ||
      it->get<int64_t>() > INT32_MAX || it->get<int64_t>() < INT32_MIN)
    return Status::error(key_error(origin, key, "a 32-bit integer", *it));
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::optional<float>> float_field(const json& obj, const char* key, const std::string& origin) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<float>();
  if (!it->is_number() || !std::isfinite(it->get<double>()))
    return Status::error(key_error(origin, key, "a finite number", *it));
  return std::optional<float>(static_cast<float>(it->get<double>()));
}

Result<std::optional<bool>> bool_field(const json& obj, const char* key, const std::string& origin) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return Status::error(key_error(origin, key, "true or false", *it));
  return std::optional<bool>(it->get<bool>());
}

}  // namespace

namespace loader_detail {

Result<json> resolve_text_config(const json& full, const std::string& origin) {
  if (!full.is_object()) return Status::error(origin + ": must be a JSON object, got " + full.type_name());
  json text = full;
  auto nested = full.find("text_config");
  if (nested != full.end() && !nested->is_null()) {
    if (!nested->is_object())
      return Status::error(origin + ": key \"text_config\" must be an object, got " + nested->type_name());
    text = *nested;
    for (const char* key : kInheritedKeys)
      if (!text.contains(key) && full.contains(key)) text[key] = full[key];
    // Some wrappers name the text model's type only at the top level.
    if (!text.contains("model_type") && full.contains("model_type")) text["model_type"] = full["model_type"];
  }
  auto model_type = text.find("model_type");
  if (model_type == text.end())
    return Status::error(origin + ": no \"model_type\"" +
                         (nested != full.end() ? " (looked in \"text_config\" and at the top level)" : ""));
  if (!model_type->is_string() || model_type->get_ref<const std::string&>().empty())
    return Status::error(origin + ": key \"model_type\" must be a non-empty string, got " +
                         (model_type->is_string() ? "\"\"" : std::string(model_type->type_name())));
  return text;
}

Status read_special_tokens(const json& obj, const std::string& origin, GenerationConfig& out) {
  auto eos = obj.find("eos_token_id");
  if (eos != obj.end() && !eos->is_null()) {
    json ids = eos->is_array() ? *eos : json::array({*eos});
    std::vector<int32_t> parsed;
    for (const json& id : ids) {
      // Out-of-range or non-integer entries make the whole key wrong; negative ids are never tokens.
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX ||
          (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX))
        return Status::error(
            key_error(origin, "eos_token_id", "a token id (non-negative integer) or a list of them", id));
      parsed.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    out.eos_token_ids = std::move(parsed);
  }
  // Old checkpoints write -1 for "no such token"; that is what nullopt says here.
  using TokenField = std::pair<const char*, std::optional<int32_t>*>;
  for (auto [key, field] :
       {TokenField{"bos_token_id", &out.bos_token_id}, TokenField{"pad_token_id", &out.pad_token_id}}) {
    HELIUM_ASSIGN_OR_RETURN(std::optional<int64_t> id, integer_field(obj, key, origin));
    if (id) *field = *id >= 0 ? std::optional<int32_t>(static_cast<int32_t>(*id)) : std::nullopt;
  }
  return Status::ok();
}

}  // namespace loader_detail

Result<json> parse_text_config(const std::string& config_json, const std::string& origin) {
  HELIUM_ASSIGN_OR_RETURN(json full, parse_json_text(config_json, origin));
  return loader_detail::resolve_text_config(full, origin);
}

Result<GenerationConfig> parse_generation_config(const std::string& json_text, const std::string& origin) {
  HELIUM_ASSIGN_OR_RETURN(json doc, parse_json_text(json_text, origin));
  if (!doc.is_object()) return Status::error(origin + ": must be a JSON object, got " + doc.type_name());
  GenerationConfig g;
  HELIUM_RETURN_IF_ERROR(loader_detail::read_special_tokens(doc, origin, g));
  using FloatField = std::pair<const char*, std::optional<float>*>;
  for (auto [key, field] :
       {FloatField{"temperature", &g.temperature}, FloatField{"top_p", &g.top_p},
        FloatField{"min_p", &g.min_p}, FloatField{"repetition_penalty", &g.repetition_penalty}}) {
    HELIUM_ASSIGN_OR_RETURN(*field, float_field(doc, key, origin));
  }
  HELIUM_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, integer_field(doc, "top_k", origin));
  if (top_k) g.top_k = static_cast<int32_t>(*top_k);
  HELIUM_ASSIGN_OR_RETURN(g.do_sample, bool_field(doc, "do_sample", origin));
  return g;
}

}  // namespace helium
