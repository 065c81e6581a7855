// chat/tool_call_llama3.cpp — Llama 3.1-3.3 JSON tool calls. The templates ask the model to answer
// with nothing but `{"name": function name, "parameters": {...}}`, which the model may put after
// `<|python_tag|>` (decoded with special tokens kept). There is no closing tag, so a message is a call
// only if all of it is: it starts with '{' (after whitespace, or after the tag), and at the end of the
// output it is one object, or several joined by ';', each with a string name the request offers and
// "parameters" (or "arguments") holding an object. Anything else is text, emitted as soon as it is
// certain: a message that does not start with '{' streams at once; one that does is held until the
// scan proves it is not a lone object sequence, or until the end.
#include <utility>
#include <vector>

#include "chat/output_parser_scan.h"
#include "chat/tool_call.h"

namespace helium {
namespace {

using nlohmann::ordered_json;
using output_scan::TagMatch;

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3ToolCallParser final : public ContentParser {
 public:
  explicit Llama3ToolCallParser(const ToolSet& tools) : tools_(tools) {}

  void feed(std::string_view chunk, ContentSink& sink) override {
    if (mode_ == Mode::kText) {
      if (!chunk.empty()) sink.on_text(chunk);
      return;
    }
    pending_.append(chunk);
    advance(sink, /*at_end=*/false);
  }

  void finish(ContentSink& sink) override {
    if (mode_ != Mode::kText) advance(sink, /*at_end=*/true);
  }

 private:
  enum class Mode { kStart, kCandidate, kText };

  void advance(ContentSink& sink, bool at_end) {
    if (mode_ == Mode::kStart) {
      const size_t space = output_scan::leading_space_length(pending_);
      std::string_view rest = std::string_view(pending_).substr(space);
      if (rest.empty()) {
        if (at_end) become_text(sink);
        return;
      }
      TagMatch tag = output_scan::match_tag_at_start(rest, kPythonTag);
      if (tag == TagMatch::kPartial && !at_end) return;
      if (tag == TagMatch::kFull) {
        pos_ = space + kPythonTag.size();
      } else if (rest.front() == '{') {
        pos_ = space;
      } else {
        become_text(sink);
        return;
      }
      mode_ = Mode::kCandidate;
    }
    const std::string_view pending = pending_;
    for (;;) {
      if (!in_object_) {
        // Whitespace before the first object; whitespace and ';' between objects.
        while (pos_ < pending.size() &&
               (output_scan::is_space(pending[pos_]) || (!objects_.empty() && pending[pos_] == ';'))) {
          ++pos_;
        }
        if (pos_ == pending.size()) break;
        if (pending[pos_] != '{') return become_text(sink);
        in_object_ = true;
        object_begin_ = pos_;
        scanner_ = JsonValueScanner();
      }
      JsonValueScanner::State state = scanner_.scan(pending.substr(object_begin_));
      if (state == JsonValueScanner::State::kInvalid) return become_text(sink);
      if (state == JsonValueScanner::State::kInside) break;
      objects_.emplace_back(object_begin_, scanner_.length());
      pos_ = object_begin_ + scanner_.length();
      in_object_ = false;
    }
    if (!at_end) return;
    if (in_object_ || objects_.empty()) return become_text(sink);
    std::vector<ParsedToolCall> calls;
    for (auto [begin, length] : objects_) {
      std::optional<ParsedToolCall> call = read_call(pending.substr(begin, length));
      if (!call) return become_text(sink);
      calls.push_back(std::move(*call));
    }
    calls.front().raw = pending_;
    for (ParsedToolCall& call : calls) sink.on_tool_call(std::move(call));
    pending_.clear();
    objects_.clear();
    mode_ = Mode::kText;
  }

  std::optional<ParsedToolCall> read_call(std::string_view object_text) const {
    std::optional<ordered_json> parsed = parse_json_text(object_text);
    if (!parsed || !parsed->is_object()) return std::nullopt;
    auto name = parsed->find("name");
    if (name == parsed->end() || !name->is_string()) return std::nullopt;
    const std::string& name_text = name->get_ref<const std::string&>();
    if (name_text.empty() || !tools_.accepts(name_text)) return std::nullopt;
    // Unlike the tagged formats, the arguments must be present: without tags, a plain JSON answer such
    // as {"name": "Ada"} must stay text.
    auto arguments = parsed->find("parameters");
    if (arguments == parsed->end()) arguments = parsed->find("arguments");
    if (arguments == parsed->end() || arguments->is_null()) return std::nullopt;
    std::optional<std::string> arguments_text = normalize_arguments(*arguments);
    if (!arguments_text) return std::nullopt;
    return ParsedToolCall{name_text, std::move(*arguments_text), {}};
  }

  // Fail closed: everything held so far is text, and so is the rest of the message.
  void become_text(ContentSink& sink) {
    if (!pending_.empty()) sink.on_text(pending_);
    pending_.clear();
    objects_.clear();
    mode_ = Mode::kText;
  }

  const ToolSet& tools_;
  Mode mode_ = Mode::kStart;
  std::string pending_;                    // the whole message so far while it may be a call
  size_t pos_ = 0;                         // next byte of pending_ to scan
  bool in_object_ = false;
  size_t object_begin_ = 0;
  JsonValueScanner scanner_;
  std::vector<std::pair<size_t, size_t>> objects_;  // complete objects: (offset, length) in pending_
};

}  // namespace

std::unique_ptr<ContentParser> make_llama3_tool_call_parser(const ToolSet& tools) {
  return std::make_unique<Llama3ToolCallParser>(tools);
}

}  // namespace helium
