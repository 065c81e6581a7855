// tokenizer/normalizer.h — tokenizer.json normalizers: the text rewrites applied before pre-tokenization.
// Owns: NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Prepend, Replace, ByteLevel and Sequence, each
// with the reference Rust library's semantics. Must not: split text or know vocabularies.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace helium::tokenizer_json {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 and so is the result.
  virtual std::string normalize(std::string text) const = 0;
};

// Builds the normalizer described by `node` (a tokenizer.json "normalizer" object). `where` names it in
// errors; an unknown or unsupported type is an error, never a silent pass-through.
Result<std::unique_ptr<Normalizer>> parse_normalizer(const json_fields::Json& node, const std::string& where);

}  // namespace helium::tokenizer_json
