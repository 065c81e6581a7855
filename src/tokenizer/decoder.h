// tokenizer/decoder.h — tokenizer.json decoders: turning the token strings of ids back into text.
// Owns: ByteLevel, ByteFallback, Metaspace, Replace, Fuse, Strip, BPEDecoder and Sequence. Must not: look
// up ids (the caller passes token strings) or drop special tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace helium::tokenizer_json {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings; the decoded text is their concatenation. Each step of a
  // Sequence sees the list the previous step left, as in the reference.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

Result<std::unique_ptr<Decoder>> parse_decoder(const json_fields::Json& node, const std::string& where);

}  // namespace helium::tokenizer_json
