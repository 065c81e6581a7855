// tokenizer/tokenizer.cpp — tokenizer.json + tokenizer_config.json into a Tokenizer: the encode and
// decode pipelines of the reference `tokenizers` library, assembled from this folder's components.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "core/mapped_file.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/unicode.h"

namespace helium {

namespace {

// The components of the tokenizer.json format live in helium::tokenizer_json, private to this folder.
using tokenizer_json::AddedToken;
using tokenizer_json::AddedVocabulary;
using tokenizer_json::BpeModel;
using tokenizer_json::Decoder;
using tokenizer_json::Normalizer;
using tokenizer_json::PostProcessor;
using tokenizer_json::PreToken;
using tokenizer_json::PreTokenizer;
using tokenizer_json::TokenizerConfig;
namespace json_fields = tokenizer_json::json_fields;
namespace unicode = tokenizer_json::unicode;
using json_fields::Json;

class JsonTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;

  int32_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    if (const AddedToken* added = added_.find_content(token)) return added->id;
    return model_->token_to_id(token);
  }
  std::optional<std::string> id_to_token(int32_t id) const override {
    if (const std::string* token = token_string(id)) return *token;
    return std::nullopt;
  }
  bool is_special(int32_t id) const override {
    const AddedToken* added = added_.find_id(id);
    return added != nullptr && added->special;
  }
  std::optional<int32_t> bos_token_id() const override { return bos_id_; }
  std::optional<int32_t> eos_token_id() const override { return eos_id_; }
  const std::string& chat_template() const override { return chat_template_; }

  static Result<std::shared_ptr<JsonTokenizer>> build(const Json& tokenizer);
  // Takes bos/eos and the chat template from tokenizer_config.json.
  Status apply_config(const TokenizerConfig& config);

 private:
  const std::string* token_string(int32_t id) const {
    if (const AddedToken* added = added_.find_id(id)) return &added->content;
    return model_->id_to_token(id);
  }
  // Normalizes, pre-tokenizes and tokenizes one stretch of text that holds no raw-matched added token.
  void encode_plain(std::string_view text, bool at_input_start, std::vector<int32_t>& ids) const;

  std::unique_ptr<Normalizer> normalizer_;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer_;  // may be null
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;  // may be null
  std::unique_ptr<Decoder> decoder_;               // may be null
  AddedVocabulary added_;
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_, eos_id_;
  std::string chat_template_;
};

// The pipeline of the reference's Tokenizer::encode for one sequence:
//   1. tokens with normalized == false are cut out of the raw text;
//   2. each remaining stretch is normalized, and tokens with normalized == true are cut out of it;
//   3. the rest is pre-tokenized into words and each word goes through the model;
//   4. with add_special_tokens, the post-processor adds its tokens (e.g. <bos>).
std::vector<int32_t> JsonTokenizer::encode(std::string_view raw, bool add_special_tokens) const {
  const std::string text = unicode::to_valid_utf8(raw);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const AddedVocabulary::Split& split : added_.split(text, /*normalized_kind=*/false)) {
    if (split.token >= 0) {
      ids.push_back(added_.tokens()[static_cast<size_t>(split.token)].id);
      continue;
    }
    encode_plain(std::string_view(text).substr(split.begin, split.end - split.begin), split.begin == 0, ids);
  }
  if (add_special_tokens && post_processor_) post_processor_->add_special_tokens(ids);
  return ids;
}

void JsonTokenizer::encode_plain(std::string_view text, bool at_input_start,
                                 std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  const std::string normalized = normalizer_ ? normalizer_->normalize(std::string(text)) : std::string(text);
  std::vector<PreToken> words;
  for (const AddedVocabulary::Split& split : added_.split(normalized, /*normalized_kind=*/true)) {
    if (split.token >= 0) {
      ids.push_back(added_.tokens()[static_cast<size_t>(split.token)].id);
      continue;
    }
    if (split.end == split.begin) continue;
    words.assign(1, PreToken{normalized.substr(split.begin, split.end - split.begin),
                             at_input_start && split.begin == 0});
    if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(words);
    for (const PreToken& word : words) model_->tokenize(word.text, ids);
  }
}

std::string JsonTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    // Like the reference, an id that names no token is left out.
    if (const std::string* token = token_string(id)) tokens.push_back(*token);
  }
  if (!decoder_) {
    // Without a decoder the reference joins the tokens with spaces.
    std::string text;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text += tokens[i];
    }
    return text;
  }
  decoder_->decode_chain(tokens);
  std::string text;
  for (const std::string& piece : tokens) text += piece;
  return text;
}

// Reads an optional component: absent or null means "none".
template <class Component, class ParseFn>
Status parse_optional(const Json& tokenizer, const char* key, ParseFn parse,
                      std::unique_ptr<Component>& out) {
  const auto it = tokenizer.find(key);
  if (it == tokenizer.end() || it->is_null()) return Status::ok();
  Result<std::unique_ptr<Component>> parsed = parse(*it, key);
  if (!parsed.is_ok()) return parsed.status();
  out = std::move(parsed).value();
  return Status::ok();
}

Result<std::shared_ptr<JsonTokenizer>> JsonTokenizer::build(const Json& tokenizer) {
  if (!tokenizer.is_object()) return Status::error("the top level must be an object");
  auto result = std::make_shared<JsonTokenizer>();

  const auto model = tokenizer.find("model");
  if (model == tokenizer.end() || model->is_null()) return Status::error("'model' is missing");
  if (!model->is_object()) return Status::error("'model' must be an object");
  std::string model_type;
  if (const auto type = model->find("type"); type != model->end() && type->is_string()) {
    model_type = type->get<std::string>();
  } else if (model->contains("merges")) {
    model_type = "BPE";  // files from before the "type" field
  }
  if (model_type != "BPE") {
    return Status::error("unsupported model type '" + model_type + "' (only BPE is supported)");
  }
  HELIUM_ASSIGN_OR_RETURN(result->model_, BpeModel::from_json(*model));

  HELIUM_RETURN_IF_ERROR(
      parse_optional(tokenizer, "normalizer", tokenizer_json::parse_normalizer, result->normalizer_));
  HELIUM_RETURN_IF_ERROR(parse_optional(tokenizer, "pre_tokenizer", tokenizer_json::parse_pre_tokenizer,
                                        result->pre_tokenizer_));
  HELIUM_RETURN_IF_ERROR(parse_optional(tokenizer, "post_processor", tokenizer_json::parse_post_processor,
                                        result->post_processor_));
  HELIUM_RETURN_IF_ERROR(
      parse_optional(tokenizer, "decoder", tokenizer_json::parse_decoder, result->decoder_));

  const auto added = tokenizer.find("added_tokens");
  HELIUM_ASSIGN_OR_RETURN(
      result->added_,
      AddedVocabulary::from_json(added == tokenizer.end() ? Json() : *added, result->normalizer_.get()));

  // The model's ids and the added tokens' ids together; the engine sizes its logits by this.
  result->vocab_size_ = result->model_->id_end();
  for (const AddedToken& token : result->added_.tokens()) {
    result->vocab_size_ = std::max(result->vocab_size_, token.id + 1);
  }

  return result;
}

Status JsonTokenizer::apply_config(const TokenizerConfig& config) {
  auto resolve = [this](const std::optional<std::string>& name,
                        const char* key) -> Result<std::optional<int32_t>> {
    if (!name) return std::optional<int32_t>();
    const std::optional<int32_t> id = token_to_id(*name);
    if (!id) return Status::error(std::string(key) + " '" + *name + "' is not a token of the tokenizer");
    return id;
  };
  HELIUM_ASSIGN_OR_RETURN(bos_id_, resolve(config.bos_token, "bos_token"));
  HELIUM_ASSIGN_OR_RETURN(eos_id_, resolve(config.eos_token, "eos_token"));
  chat_template_ = config.chat_template;
  return Status::ok();
}

Result<std::shared_ptr<const Tokenizer>> build_tokenizer(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json,
                                                         const std::string& origin,
                                                         const std::string& config_origin,
                                                         std::string fallback_chat_template) {
  Result<TokenizerConfig> config = tokenizer_json::parse_tokenizer_config(tokenizer_config_json);
  if (!config.is_ok()) return config.status().with_context(config_origin);
  if (config->chat_template.empty()) config->chat_template = std::move(fallback_chat_template);
  Result<Json> parsed = json_fields::parse_json_text(tokenizer_json);
  if (!parsed.is_ok()) return parsed.status().with_context(origin);
  // nlohmann::json reports type mismatches by throwing; every field is read through checked accessors,
  // so this is only a guard that keeps an unforeseen shape from escaping as an exception.
  try {
    Result<std::shared_ptr<JsonTokenizer>> built = JsonTokenizer::build(parsed.value());
    if (!built.is_ok()) return built.status().with_context(origin);
    const Status configured = built.value()->apply_config(config.value());
    if (!configured.is_ok()) return configured.with_context(config_origin);
    return std::shared_ptr<const Tokenizer>(std::move(built).value());
  } catch (const Json::exception& e) {
    return Status::error(std::string("unexpected structure: ") + e.what()).with_context(origin);
  }
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_json(std::string_view tokenizer_json,
                                                              std::string_view tokenizer_config_json,
                                                              const std::string& origin) {
  return build_tokenizer(tokenizer_json, tokenizer_config_json, origin, origin + " (tokenizer_config.json)",
                         "");
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_dir(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  const std::string config_path = dir + "/tokenizer_config.json";
  HELIUM_ASSIGN_OR_RETURN(const auto json_file, MappedFile::open(json_path));
  std::error_code ec;
  std::string config_text;
  if (std::filesystem::exists(config_path, ec)) {
    HELIUM_ASSIGN_OR_RETURN(config_text, read_file(config_path));
  }
  // Newer checkpoints keep the template in its own file instead of tokenizer_config.json.
  const std::string template_path = dir + "/chat_template.jinja";
  std::string template_text;
  if (std::filesystem::exists(template_path, ec)) {
    HELIUM_ASSIGN_OR_RETURN(template_text, read_file(template_path));
  }
  const std::string_view json_text(reinterpret_cast<const char*>(json_file->data()), json_file->size());
  return build_tokenizer(json_text, config_text, json_path, config_path, std::move(template_text));
}

}  // namespace helium
