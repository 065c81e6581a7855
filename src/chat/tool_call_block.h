// chat/tool_call_block.h — the streaming frame shared by the formats that wrap calls in tags
// (`<tool_call>` ... `</tool_call>`): text is passed through as soon as it is certain, a block is held
// back from its opening tag until its grammar accepts or rejects it, and a rejected block is text.
// Owns: the text/block state machine, the hold-back of partial opening tags, and the whitespace rule:
// whitespace right before a call (after text or another call) and after the last call is the template's
// layout, not text, and is dropped; whitespace between a call and text that follows it is kept.
// Must not: know what is inside a block; each format's CallBlockGrammar decides that.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call.h"

namespace helium {

// Reads the bytes after an opening tag, resumably: scan() gets the block body so far (the same bytes
// extended at each call) and says whether it needs more, can never be a valid block, or is complete.
class CallBlockGrammar {
 public:
  struct Outcome {
    enum Kind { kNeedMore, kInvalid, kComplete } kind = kNeedMore;
    size_t length = 0;                 // kComplete: body bytes through the closing tag
    std::vector<ParsedToolCall> calls;  // kComplete: at least one, raw left empty (the frame fills it)
  };
  virtual ~CallBlockGrammar() = default;
  // `at_end`: no more bytes will come; kNeedMore is then read as kInvalid.
  virtual Outcome scan(std::string_view body, bool at_end) = 0;
};

// A content parser for blocks opened by `open_tag`; `new_grammar` makes a fresh grammar per block.
std::unique_ptr<ContentParser> make_tagged_block_parser(std::string open_tag,
                                                        std::function<std::unique_ptr<CallBlockGrammar>()> new_grammar);

}  // namespace helium
