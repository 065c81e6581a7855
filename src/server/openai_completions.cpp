// server/openai_completions.cpp — OpenAI Completions (POST /v1/completions): a raw prompt (text, or
// token ids) continued as it is, with no chat template; streaming chunks carry `choices[0].text`.
// Owns: that API's request fields and response shapes. Must not: render prompts or run generation.
#include <limits>

#include "server/api_adapter.h"

namespace helium::server {
namespace {

std::string completion_finish_reason(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

Json completion_usage(const Completion& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_tokens}}}};
}

Status read_token_ids(const Json& array, const std::string& path, int64_t vocab_size, std::vector<int32_t>& out) {
  for (size_t i = 0; i < array.size(); ++i) {
    const Json& id = array[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
      return Status::error(std::string("`") + index_path(path, i) + "` must be a token id in [0, " + std::to_string(vocab_size) +
                           "), not " + id.dump());
    out.push_back(id.get<int32_t>());
  }
  return Status::ok();
}

Status read_prompt(const FieldReader& f, int64_t vocab_size, ParsedRequest& r) {
  const Json* prompt = f.find("prompt");
  if (!prompt) return f.missing("prompt");
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
    return Status::ok();
  }
  if (!prompt->is_array()) return f.wrong_type("prompt", "a string, an array of one string, or an array of token ids");
  if (prompt->empty()) return Status::error("`prompt` is empty");
  const Json& first = (*prompt)[0];
  if (first.is_number()) {
    r.prompt_is_tokens = true;
    return read_token_ids(*prompt, "prompt", vocab_size, r.prompt_tokens);
  }
  if (prompt->size() != 1) return Status::error("`prompt` must hold one prompt: batches of prompts are not supported");
  if (first.is_string()) {
    r.prompt_text = first.get<std::string>();
    return Status::ok();
  }
  if (first.is_array()) {
    r.prompt_is_tokens = true;
    return read_token_ids(first, "prompt[0]", vocab_size, r.prompt_tokens);
  }
  return Status::error("`prompt[0]` must be a string or an array of token ids, not " + json_type_phrase(first));
}

class CompletionsStreamWriter final : public StreamWriter {
 public:
  explicit CompletionsStreamWriter(const ResponseContext& context)
      : StreamWriter(context), id_(make_response_id("cmpl-", context.id_seed)) {}

 private:
  Json chunk(const std::string& text, Json finish_reason = nullptr) const {
    return {{"id", id_},
            {"object", "text_completion"},
            {"created", context().created_unix},
            {"model", context().model},
            {"system_fingerprint", "helium"},
            {"choices", {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", std::move(finish_reason)}}}}};
  }
  void write_start() override {
    if (context().request->echo && !context().request->prompt_text.empty())
      emit("", chunk(context().request->prompt_text));
  }
  void open_block(Block, const ParserEvent&) override {}
  void block_delta(Block, const std::string& delta) override { emit("", chunk(delta)); }
  void close_block(Block) override {}
  void write_finish(const Completion& c) override {
    end_openai_stream(chunk("", completion_finish_reason(c.reason)), chunk(""), completion_usage(c));
  }
  void write_failure(const ApiError& error) override { fail_openai_stream(error); }

  std::string id_;
};

class OpenAICompletionsAdapter final : public ApiAdapter {
 public:
  ApiFlavor flavor() const override { return ApiFlavor::kOpenAI; }
  std::string_view name() const override { return "completions"; }

  Result<ParsedRequest> parse(const Json& body, const ParseContext& context) const override {
    if (!body.is_object()) return Status::error("the request body must be a JSON object, not " + json_type_phrase(body));
    FieldReader f(body, "");
    ParsedRequest r;
    r.kind = RequestKind::kCompletion;
    HELIUM_ASSIGN_OR_RETURN(auto model, f.string("model"));
    (void)model;
    HELIUM_RETURN_IF_ERROR(read_prompt(f, context.vocab_size, r));
    HELIUM_ASSIGN_OR_RETURN(auto stream, f.boolean("stream"));
    r.stream = stream.value_or(false);
    HELIUM_ASSIGN_OR_RETURN(const Json* stream_options, f.object("stream_options"));
    if (stream_options) {
      HELIUM_ASSIGN_OR_RETURN(auto include_usage, FieldReader(*stream_options, "stream_options").boolean("include_usage"));
      r.include_usage = include_usage.value_or(false);
    }
    HELIUM_ASSIGN_OR_RETURN(auto n, f.integer("n", 1, 128));
    if (n && *n != 1) return Status::error("`n` must be 1: one choice per request is supported");
    HELIUM_ASSIGN_OR_RETURN(auto best_of, f.integer("best_of", 1, 128));
    if (best_of && *best_of != 1) return Status::error("`best_of` must be 1");
    HELIUM_ASSIGN_OR_RETURN(auto echo, f.boolean("echo"));
    r.echo = echo.value_or(false);
    HELIUM_ASSIGN_OR_RETURN(auto max_tokens, f.integer("max_tokens", 0, std::numeric_limits<int32_t>::max()));
    r.settings.max_tokens = max_tokens;
    r.default_max_tokens = 16;  // OpenAI's default for this endpoint
    HELIUM_RETURN_IF_ERROR(read_sampling_fields(f, r.settings));
    HELIUM_RETURN_IF_ERROR(read_stop_field(f, "stop", r.settings.stop));
    HELIUM_RETURN_IF_ERROR(read_logit_bias(f, context.vocab_size, r.settings));
    return r;
  }

  std::unique_ptr<StreamWriter> make_stream_writer(const ResponseContext& context) const override {
    return std::make_unique<CompletionsStreamWriter>(context);
  }

  Json make_response(const ResponseContext& context, const Completion& c) const override {
    std::string text = c.message.text;
    if (context.request->echo) text = context.request->prompt_text + text;
    return {{"id", make_response_id("cmpl-", context.id_seed)},
            {"object", "text_completion"},
            {"created", context.created_unix},
            {"model", context.model},
            {"system_fingerprint", "helium"},
            {"choices", {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", completion_finish_reason(c.reason)}}}},
            {"usage", completion_usage(c)}};
  }
};

}  // namespace

std::unique_ptr<ApiAdapter> make_openai_completions_adapter() { return std::make_unique<OpenAICompletionsAdapter>(); }

}  // namespace helium::server
