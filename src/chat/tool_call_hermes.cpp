// chat/tool_call_hermes.cpp — Hermes-style JSON tool calls, as the Qwen 2.5 / Qwen3 templates ask for:
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// One JSON object per block ("arguments" may also be a string holding the object, or be named
// "parameters"); blocks may follow each other. A block is a call only when its object parses completely,
// has a non-empty string name the request offers, and arguments that are an object.
#include <optional>

#include "chat/output_parser_scan.h"
#include "chat/tool_call.h"
#include "chat/tool_call_block.h"

namespace helium {
namespace {

using nlohmann::ordered_json;
using output_scan::is_space;
using output_scan::TagMatch;

constexpr std::string_view kCloseTag = "</tool_call>";

class HermesBlockGrammar final : public CallBlockGrammar {
 public:
  explicit HermesBlockGrammar(const ToolSet& tools) : tools_(tools) {}

  Outcome scan(std::string_view body, bool at_end) override {
    if (phase_ == Phase::kBeforeObject) {
      while (pos_ < body.size() && is_space(body[pos_])) ++pos_;
      if (pos_ == body.size()) return need_more(at_end);
      if (body[pos_] != '{') return invalid();
      object_begin_ = pos_;
      phase_ = Phase::kObject;
    }
    if (phase_ == Phase::kObject) {
      switch (object_.scan(body.substr(object_begin_))) {
        case JsonValueScanner::State::kInside:
          return need_more(at_end);
        case JsonValueScanner::State::kInvalid:
          return invalid();
        case JsonValueScanner::State::kComplete:
          pos_ = object_begin_ + object_.length();
          phase_ = Phase::kAfterObject;
      }
    }
    while (pos_ < body.size() && is_space(body[pos_])) ++pos_;
    switch (output_scan::match_tag_at_start(body.substr(pos_), kCloseTag)) {
      case TagMatch::kPartial:
        return need_more(at_end);
      case TagMatch::kNo:
        return invalid();
      case TagMatch::kFull:
        break;
    }
    std::optional<ParsedToolCall> call = read_call(body.substr(object_begin_, object_.length()));
    if (!call) return invalid();
    Outcome outcome;
    outcome.kind = Outcome::kComplete;
    outcome.length = pos_ + kCloseTag.size();
    outcome.calls.push_back(std::move(*call));
    return outcome;
  }

 private:
  enum class Phase { kBeforeObject, kObject, kAfterObject };

  static Outcome need_more(bool at_end) { return at_end ? invalid() : Outcome{}; }
  static Outcome invalid() { return Outcome{Outcome::kInvalid, 0, {}}; }

  std::optional<ParsedToolCall> read_call(std::string_view object_text) const {
    std::optional<ordered_json> parsed = parse_json_text(object_text);
    if (!parsed || !parsed->is_object()) return std::nullopt;
    const ordered_json& object = *parsed;
    auto name = object.find("name");
    if (name == object.end() || !name->is_string()) return std::nullopt;
    const std::string& name_text = name->get_ref<const std::string&>();
    if (name_text.empty() || !tools_.accepts(name_text)) return std::nullopt;
    auto arguments = object.find("arguments");
    if (arguments == object.end()) arguments = object.find("parameters");
    std::optional<std::string> arguments_text =
        normalize_arguments(arguments == object.end() ? ordered_json() : *arguments);
    if (!arguments_text) return std::nullopt;
    return ParsedToolCall{name_text, std::move(*arguments_text), {}};
  }

  const ToolSet& tools_;
  Phase phase_ = Phase::kBeforeObject;
  size_t pos_ = 0;
  size_t object_begin_ = 0;
  JsonValueScanner object_;
};

}  // namespace

std::unique_ptr<ContentParser> make_hermes_tool_call_parser(const ToolSet& tools) {
  return make_tagged_block_parser("<tool_call>", [&tools] { return std::make_unique<HermesBlockGrammar>(tools); });
}

}  // namespace helium
