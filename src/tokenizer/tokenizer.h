// tokenizer/tokenizer.h — Hugging Face tokenizer.json tokenizers (byte-level BPE and SentencePiece-style
// BPE), encoding and decoding exactly as the reference `tokenizers` library does.
// Owns: normalizers, pre-tokenizers, the BPE model, added/special tokens, post-processing (BOS/EOS),
// decoders and incremental detokenization. Must not: know chat templates, models or devices.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace helium {

// A loaded tokenizer is immutable (its word cache is internally locked): encode and decode may be called
// from several threads at once on one shared instance.
class Tokenizer {
 public:
  // Parses tokenizer.json text (and optionally tokenizer_config.json text for bos/eos/chat template
  // facts). `origin` names the file in errors.
  static Result<std::shared_ptr<const Tokenizer>> from_json(std::string_view tokenizer_json,
                                                            std::string_view tokenizer_config_json,
                                                            const std::string& origin);
  // Reads `dir`/tokenizer.json and, when present, `dir`/tokenizer_config.json.
  static Result<std::shared_ptr<const Tokenizer>> from_dir(const std::string& dir);
  virtual ~Tokenizer() = default;

  // Text -> ids. Invalid UTF-8 is replaced by U+FFFD first (as a JavaScript or lossy Rust decoder would).
  // add_special_tokens applies the post-processor (e.g. Llama 3's BOS); special tokens written in the
  // text are recognised as such (as the reference does).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const = 0;
  // Ids -> text; skip_special_tokens drops added tokens marked special.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const = 0;

  virtual int32_t vocab_size() const = 0;  // including added tokens
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> id_to_token(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;

  // From tokenizer_config.json when given (bos_token/eos_token may be strings or {content: ...}).
  virtual std::optional<int32_t> bos_token_id() const = 0;
  virtual std::optional<int32_t> eos_token_id() const = 0;
  virtual const std::string& chat_template() const = 0;  // empty when none
};

// Turns a stream of ids into text pieces that never split a UTF-8 sequence or a multi-token character:
// push() returns only text that is final; flush() returns what is left at the end.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                  bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string flush();

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids before this are settled
  size_t read_offset_ = 0;
};

}  // namespace helium
