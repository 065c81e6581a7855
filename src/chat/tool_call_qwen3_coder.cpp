// chat/tool_call_qwen3_coder.cpp — the XML-like tool calls of Qwen3-Coder and Qwen3.5:
//   <tool_call>
//   <function=write_file>
//   <parameter=path>
//   src/main.cpp
//   </parameter>
//   <parameter=content>
//   raw text over
//   several lines
//   </parameter>
//   </function>
//   </tool_call>
// The template writes each value between a newline after the opening tag and one before the closing
// tag; those two newlines are markup. A value is raw text that ends only at `</parameter>`, so code that
// mentions `</function>` or `<parameter=` survives. Values become JSON by the tool's schema
// (ToolSet::convert_parameter). A block may hold several functions. Strict: every tag must be where
// the template puts it, with only whitespace between tags; anything else makes the block text.
#include <algorithm>

#include "chat/output_parser_scan.h"
#include "chat/tool_call.h"
#include "chat/tool_call_block.h"

namespace helium {
namespace {

using nlohmann::ordered_json;
using output_scan::is_space;
using output_scan::match_tag_at_start;
using output_scan::TagMatch;

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr std::string_view kBlockClose = "</tool_call>";
constexpr size_t kMaxNameBytes = 256;

class Qwen3CoderBlockGrammar final : public CallBlockGrammar {
 public:
  explicit Qwen3CoderBlockGrammar(const ToolSet& tools) : tools_(tools) {}

  Outcome scan(std::string_view body, bool at_end) override {
    for (;;) {
      switch (phase_) {
        case Phase::kBeforeFunction: {
          skip_space(body);
          std::string_view rest = body.substr(pos_);
          if (rest.empty()) return need_more(at_end);
          TagMatch close = calls_.empty() ? TagMatch::kNo : match_tag_at_start(rest, kBlockClose);
          if (close == TagMatch::kFull) return complete(pos_ + kBlockClose.size());
          TagMatch open = match_tag_at_start(rest, kFunctionOpen);
          if (open == TagMatch::kFull) {
            pos_ += kFunctionOpen.size();
            name_begin_ = pos_;
            phase_ = Phase::kFunctionName;
            break;
          }
          if (open == TagMatch::kPartial || close == TagMatch::kPartial) return need_more(at_end);
          return invalid();
        }
        case Phase::kFunctionName: {
          NameScan name = scan_name(body);
          if (name == NameScan::kNeedMore) return need_more(at_end);
          if (name == NameScan::kInvalid || !tools_.accepts(name_)) return invalid();
          function_name_ = name_;
          arguments_ = ordered_json::object();
          phase_ = Phase::kBeforeParameter;
          break;
        }
        case Phase::kBeforeParameter: {
          skip_space(body);
          std::string_view rest = body.substr(pos_);
          if (rest.empty()) return need_more(at_end);
          TagMatch parameter = match_tag_at_start(rest, kParameterOpen);
          TagMatch close = match_tag_at_start(rest, kFunctionClose);
          if (parameter == TagMatch::kFull) {
            pos_ += kParameterOpen.size();
            name_begin_ = pos_;
            phase_ = Phase::kParameterName;
          } else if (close == TagMatch::kFull) {
            pos_ += kFunctionClose.size();
            calls_.push_back(ParsedToolCall{function_name_, dump_compact_json(arguments_), {}});
            phase_ = Phase::kBeforeFunction;
          } else if (parameter == TagMatch::kPartial || close == TagMatch::kPartial) {
            return need_more(at_end);
          } else {
            return invalid();
          }
          break;
        }
        case Phase::kParameterName: {
          NameScan name = scan_name(body);
          if (name == NameScan::kNeedMore) return need_more(at_end);
          if (name == NameScan::kInvalid) return invalid();
          parameter_name_ = name_;
          value_begin_ = pos_;
          phase_ = Phase::kParameterValue;
          break;
        }
        case Phase::kParameterValue: {
          size_t close = body.find(kParameterClose, std::max(pos_, value_begin_));
          if (close == std::string_view::npos) {
            // Resume the search where a closing tag could still begin.
            pos_ = std::max(value_begin_, body.size() - std::min(body.size(), kParameterClose.size() - 1));
            return need_more(at_end);
          }
          std::string_view value = body.substr(value_begin_, close - value_begin_);
          if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
          if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
          arguments_[parameter_name_] = tools_.convert_parameter(function_name_, parameter_name_, value);
          pos_ = close + kParameterClose.size();
          phase_ = Phase::kBeforeParameter;
          break;
        }
      }
    }
  }

 private:
  enum class Phase { kBeforeFunction, kFunctionName, kBeforeParameter, kParameterName, kParameterValue };
  enum class NameScan { kNeedMore, kInvalid, kDone };

  static Outcome need_more(bool at_end) { return at_end ? invalid() : Outcome{}; }
  static Outcome invalid() { return Outcome{Outcome::kInvalid, 0, {}}; }

  Outcome complete(size_t length) {
    Outcome outcome;
    outcome.kind = Outcome::kComplete;
    outcome.length = length;
    outcome.calls = std::move(calls_);
    return outcome;
  }

  void skip_space(std::string_view body) {
    while (pos_ < body.size() && is_space(body[pos_])) ++pos_;
  }

  // Reads the name that starts at name_begin_ up to its '>'; a name has no whitespace or '<'.
  NameScan scan_name(std::string_view body) {
    size_t end = pos_;
    while (end < body.size() && body[end] != '>') {
      char c = body[end];
      if (is_space(c) || c == '<' || static_cast<unsigned char>(c) < 0x20) return NameScan::kInvalid;
      ++end;
    }
    if (end - name_begin_ > kMaxNameBytes) return NameScan::kInvalid;
    if (end == body.size()) {
      pos_ = end;
      return NameScan::kNeedMore;
    }
    if (end == name_begin_) return NameScan::kInvalid;
    name_ = std::string(body.substr(name_begin_, end - name_begin_));
    pos_ = end + 1;
    return NameScan::kDone;
  }

  const ToolSet& tools_;
  Phase phase_ = Phase::kBeforeFunction;
  size_t pos_ = 0;         // next body byte to read
  size_t name_begin_ = 0;  // start of the name being read
  size_t value_begin_ = 0;
  std::string name_;
  std::string function_name_;
  std::string parameter_name_;
  ordered_json arguments_;
  std::vector<ParsedToolCall> calls_;
};

}  // namespace

std::unique_ptr<ContentParser> make_qwen3_coder_tool_call_parser(const ToolSet& tools) {
  return make_tagged_block_parser("<tool_call>",
                                  [&tools] { return std::make_unique<Qwen3CoderBlockGrammar>(tools); });
}

}  // namespace helium
