// tokenizer/pre_tokenizer.h — tokenizer.json pre-tokenizers: cutting normalized text into the words that
// the model tokenizes one at a time.
// Owns: Split (regex or literal, every split behavior, invert), ByteLevel, Metaspace, Whitespace,
// WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, CharDelimiterSplit and Sequence, with the
// reference Rust library's semantics. Must not: know vocabularies or ids.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace helium::tokenizer_json {

struct PreToken {
  std::string text;
  // True when the piece starts at the very beginning of the input text; Metaspace's prepend_scheme
  // "first" adds its prefix only there (the reference tests the piece's original offset against 0).
  bool at_input_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their pre-tokens, in order; pieces that become empty are dropped.
  virtual void pre_tokenize(std::vector<PreToken>& pieces) const = 0;
};

// Where Metaspace puts its replacement character in front of a piece: always, only on the piece at the
// start of the input, or never. Shared with the Metaspace decoder, which must undo the same choice.
enum class PrependScheme { kAlways, kFirst, kNever };
// Reads "prepend_scheme" (or the older "add_prefix_space") of a Metaspace object.
Result<PrependScheme> parse_prepend_scheme(const json_fields::Json& node, const std::string& where);

// Builds the pre-tokenizer described by `node` (a tokenizer.json "pre_tokenizer" object). An unknown or
// unsupported type is an error.
Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const json_fields::Json& node,
                                                          const std::string& where);

}  // namespace helium::tokenizer_json
