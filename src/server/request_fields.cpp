// server/request_fields.cpp — request fields several APIs share: sampling settings, stop strings,
// logit bias, structured-output formats and OpenAI content parts. See api_adapter.h.
#include <cmath>
#include <limits>

#include "server/api_adapter.h"

namespace helium::server {

Status read_sampling_fields(const FieldReader& f, GenerationSettings& s) {
  auto as_float = [](const std::optional<double>& v) {
    return v ? std::optional<float>(static_cast<float>(*v)) : std::nullopt;
  };
  HELIUM_ASSIGN_OR_RETURN(auto temperature, f.number("temperature", 0.0, 100.0));
  HELIUM_ASSIGN_OR_RETURN(auto top_p, f.number("top_p", 0.0, 1.0));
  HELIUM_ASSIGN_OR_RETURN(auto min_p, f.number("min_p", 0.0, 1.0));
  HELIUM_ASSIGN_OR_RETURN(auto top_k, f.integer("top_k", 0, std::numeric_limits<int32_t>::max()));
  HELIUM_ASSIGN_OR_RETURN(auto repetition, f.number("repetition_penalty", 1e-3, 100.0));
  HELIUM_ASSIGN_OR_RETURN(auto presence, f.number("presence_penalty", -2.0, 2.0));
  HELIUM_ASSIGN_OR_RETURN(auto frequency, f.number("frequency_penalty", -2.0, 2.0));
  if (temperature) s.temperature = as_float(temperature);
  if (top_p) {
    if (*top_p <= 0.0) return Status::error(std::string("`") + f.path("top_p") + "` must be greater than 0");
    s.top_p = as_float(top_p);
  }
  if (min_p) s.min_p = as_float(min_p);
  if (top_k) s.top_k = static_cast<int>(*top_k);
  if (repetition) s.repetition_penalty = as_float(repetition);
  if (presence) s.presence_penalty = as_float(presence);
  if (frequency) s.frequency_penalty = as_float(frequency);
  if (const Json* seed = f.find("seed")) {
    // Any integer: negative seeds (some clients send -1) are taken modulo 2^64.
    if (seed->is_number_unsigned()) {
      s.seed = seed->get<uint64_t>();
    } else if (seed->is_number_integer()) {
      s.seed = static_cast<uint64_t>(seed->get<int64_t>());
    } else {
      return f.wrong_type("seed", "an integer");
    }
  }
  return Status::ok();
}

Status read_stop_field(const FieldReader& f, std::string_view key, std::vector<std::string>& stop) {
  const Json* v = f.find(key);
  if (!v) return Status::ok();
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) stop.push_back(v->get<std::string>());
    return Status::ok();
  }
  if (!v->is_array()) return f.wrong_type(key, "a string or an array of strings");
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& s = (*v)[i];
    if (!s.is_string())
      return Status::error(std::string("`") + index_path(f.path(key), i) + "` must be a string, not " + json_type_phrase(s));
    if (!s.get_ref<const std::string&>().empty()) stop.push_back(s.get<std::string>());
  }
  return Status::ok();
}

Status read_logit_bias(const FieldReader& f, int64_t vocab_size, GenerationSettings& s) {
  HELIUM_ASSIGN_OR_RETURN(const Json* bias, f.object("logit_bias"));
  if (!bias) return Status::ok();
  for (auto it = bias->begin(); it != bias->end(); ++it) {
    const std::string path = f.path("logit_bias") + "[\"" + it.key() + "\"]";
    int64_t id = -1;
    try {
      size_t used = 0;
      id = std::stoll(it.key(), &used);
      if (used != it.key().size()) id = -1;
    } catch (const std::exception&) {
      id = -1;
    }
    if (id < 0 || id >= vocab_size)
      return Status::error(std::string("`") + path + "`: the key must be a token id in [0, " + std::to_string(vocab_size) + ")");
    if (!it.value().is_number()) return Status::error(std::string("`") + path + "` must be a number");
    const double value = it.value().get<double>();
    if (!std::isfinite(value) || value < -100.0 || value > 100.0)
      return Status::error(std::string("`") + path + "` must be between -100 and 100");
    s.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(value));
  }
  return Status::ok();
}

Result<std::string> output_instruction_for_format(const Json& format, const std::string& path, bool responses_shape) {
  if (!format.is_object())
    return Status::error(std::string("`") + path + "` must be an object, not " + json_type_phrase(format));
  FieldReader f(format, path);
  HELIUM_ASSIGN_OR_RETURN(auto type, f.string("type"));
  if (!type) return f.missing("type");
  if (*type == "text") return std::string();
  if (*type == "json_object")
    return std::string("Respond with one valid JSON object and nothing else: no prose, no code fences.");
  if (*type != "json_schema")
    return Status::error(std::string("`") + f.path("type") + "` must be \"text\", \"json_object\" or \"json_schema\", not \"" + *type +
                         "\"");
  // Chat Completions nests the schema in `json_schema`; Responses puts name and schema in the format.
  const Json* holder = &format;
  std::string holder_path = path;
  if (!responses_shape) {
    HELIUM_ASSIGN_OR_RETURN(const Json* nested, f.object("json_schema"));
    if (!nested) return f.missing("json_schema");
    holder = nested;
    holder_path = f.path("json_schema");
  }
  FieldReader h(*holder, holder_path);
  HELIUM_ASSIGN_OR_RETURN(const Json* schema, h.object("schema"));
  if (!schema) return h.missing("schema");
  HELIUM_ASSIGN_OR_RETURN(auto name, h.string("name"));
  std::string instruction = "Respond with one valid JSON value that matches the JSON schema";
  if (name && !name->empty()) instruction += " \"" + *name + "\"";
  instruction += " below, and nothing else: no prose, no code fences.\n" + dump_json(*schema);
  return instruction;
}

Result<std::string> read_text_content(const Json& content, const std::string& path) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    return Status::error(std::string("`") + path + "` must be a string or an array of content parts, not " +
                         json_type_phrase(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_path = index_path(path, i);
    if (part.is_string()) {  // lenient: a bare string part
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object())
      return Status::error(std::string("`") + part_path + "` must be a content part object, not " + json_type_phrase(part));
    FieldReader f(part, part_path);
    HELIUM_ASSIGN_OR_RETURN(auto type, f.string("type"));
    if (!type) return f.missing("type");
    if (*type == "text" || *type == "input_text" || *type == "output_text") {
      HELIUM_ASSIGN_OR_RETURN(auto t, f.string("text"));
      if (!t) return f.missing("text");
      text += *t;
    } else if (*type == "refusal") {
      HELIUM_ASSIGN_OR_RETURN(auto t, f.string("refusal"));
      text += t.value_or("");
    } else if (*type == "image_url" || *type == "input_image" || *type == "input_audio" || *type == "file" ||
               *type == "input_file") {
      text += std::string("[") + *type + " omitted: this model takes text only]";
    } else {
      return Status::error(std::string("`") + f.path("type") + "`: unsupported content part type \"" + *type + "\"");
    }
  }
  return text;
}

}  // namespace helium::server
