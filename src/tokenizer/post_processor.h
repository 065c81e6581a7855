// tokenizer/post_processor.h — tokenizer.json post-processors: the special tokens that
// encode(add_special_tokens = true) puts around the text's ids (Gemma's <bos>, BERT's [CLS] ... [SEP]).
// Owns: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (no change to ids) and Sequence,
// for single sequences. Must not: touch the text's own ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_fields.h"

namespace helium::tokenizer_json {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds the special tokens around `ids` (the encoding of one sequence).
  virtual void add_special_tokens(std::vector<int32_t>& ids) const = 0;
};

Result<std::unique_ptr<PostProcessor>> parse_post_processor(const json_fields::Json& node,
                                                            const std::string& where);

}  // namespace helium::tokenizer_json
