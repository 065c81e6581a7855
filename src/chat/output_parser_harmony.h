// chat/output_parser_harmony.h — GPT-OSS "harmony" output: messages on channels, with reasoning,
// answer and tool calls told apart by their headers rather than by tags in the text.
// Owns: reading harmony headers and bodies from a stream. Must not: build server events or assign ids.
#pragma once

#include <memory>

#include "chat/tool_call.h"

namespace helium {

// The output is a series of messages `[<|start|>assistant]<|channel|>C[ to=R][ <|constrain|>json]
// <|message|>BODY<|end|>` (the recipient may also sit before `<|channel|>`). Channel analysis is
// reasoning, final and recipient-less commentary are text, and a message with recipient
// `functions.NAME` is a call whose body is the JSON object of arguments. A body ends at `<|end|>`,
// `<|call|>` or `<|return|>`, at the next header, or at the end of the output, since the engine does not
// pass the stop tokens `<|call|>`/`<|return|>` on. The text must be decoded with special tokens kept.
// A header that is not one of these, or a call whose body is not a JSON object or whose function the
// request does not offer, is text exactly as generated. Text outside any message is text.
std::unique_ptr<ContentParser> make_harmony_parser(const ToolSet& tools);

}  // namespace helium
