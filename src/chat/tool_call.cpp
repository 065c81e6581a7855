// chat/tool_call.cpp — the request's tools, argument normalisation, the JSON extent scanner, the plain
// text parser and the tagged-block frame shared by the Hermes and Qwen3-Coder formats.
#include "chat/tool_call.h"

#include <utility>

#include "chat/output_parser_scan.h"
#include "chat/tool_call_block.h"

namespace helium {

using nlohmann::json;
using nlohmann::ordered_json;
using output_scan::is_space;

namespace {

std::string_view trim_space(std::string_view text) {
  text.remove_prefix(output_scan::leading_space_length(text));
  text.remove_suffix(output_scan::trailing_space_length(text));
  return text;
}

// The JSON types a parameter schema allows: "type" (a name or a list of names), the members of
// anyOf/oneOf/allOf, or, for an enum without a type, the types of its values.
void collect_schema_types(const json& schema, std::vector<std::string>& types) {
  if (!schema.is_object()) return;
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) types.push_back(it->get<std::string>());
    if (it->is_array()) {
      for (const json& name : *it) {
        if (name.is_string()) types.push_back(name.get<std::string>());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (const json& member : *it) collect_schema_types(member, types);
    }
  }
  if (auto it = schema.find("enum"); types.empty() && it != schema.end() && it->is_array()) {
    for (const json& value : *it) {
      if (value.is_string()) types.emplace_back("string");
      if (value.is_number_integer()) types.emplace_back("integer");
      if (value.is_number_float()) types.emplace_back("number");
      if (value.is_boolean()) types.emplace_back("boolean");
      if (value.is_null()) types.emplace_back("null");
    }
  }
}

bool value_has_schema_type(const ordered_json& value, std::string_view type) {
  if (type == "string") return value.is_string();
  if (type == "integer" || type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "null") return value.is_null();
  return false;
}

bool equals_ignoring_ascii_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
    if (x != y) return false;
  }
  return true;
}

class PlainTextParser final : public ContentParser {
 public:
  void feed(std::string_view chunk, ContentSink& sink) override {
    if (!chunk.empty()) sink.on_text(chunk);
  }
  void finish(ContentSink&) override {}
};

class TaggedBlockParser final : public ContentParser {
 public:
  TaggedBlockParser(std::string open_tag, std::function<std::unique_ptr<CallBlockGrammar>()> new_grammar)
      : open_tag_(std::move(open_tag)), new_grammar_(std::move(new_grammar)) {}

  void feed(std::string_view chunk, ContentSink& sink) override {
    pending_.append(chunk);
    drain(sink, /*at_end=*/false);
  }

  void finish(ContentSink& sink) override {
    drain(sink, /*at_end=*/true);
    if (!after_call_ && !held_space_.empty()) sink.on_text(held_space_);
    held_space_.clear();
  }

 private:
  // Resolves as much of pending_ as the bytes so far allow.
  void drain(ContentSink& sink, bool at_end) {
    const std::string_view pending = pending_;
    size_t pos = 0;
    for (;;) {
      if (!grammar_) {
        size_t open = pending.find(open_tag_, pos);
        if (open == std::string_view::npos) {
          std::string_view rest = pending.substr(pos);
          size_t keep = at_end ? 0 : output_scan::partial_tag_suffix(rest, {std::string_view(open_tag_)});
          emit_text(rest.substr(0, rest.size() - keep), sink);
          pos = pending.size() - keep;
          break;
        }
        emit_text(pending.substr(pos, open - pos), sink);
        pos = open;
        grammar_ = new_grammar_();
      }
      CallBlockGrammar::Outcome outcome = grammar_->scan(pending.substr(pos + open_tag_.size()), at_end);
      if (outcome.kind == CallBlockGrammar::Outcome::kNeedMore && !at_end) break;
      grammar_.reset();
      if (outcome.kind == CallBlockGrammar::Outcome::kComplete && !outcome.calls.empty()) {
        held_space_.clear();  // it only separated the call from what came before
        outcome.calls.front().raw = std::string(pending.substr(pos, open_tag_.size() + outcome.length));
        for (ParsedToolCall& call : outcome.calls) sink.on_tool_call(std::move(call));
        after_call_ = true;
        pos += open_tag_.size() + outcome.length;
      } else {
        // Fail closed: the opening tag is text, and what followed it is read again as text.
        emit_text(open_tag_, sink);
        pos += open_tag_.size();
      }
    }
    pending_.erase(0, pos);
  }

  // Emits certain text, holding back trailing whitespace until it is known whether a call follows.
  void emit_text(std::string_view text, ContentSink& sink) {
    size_t body = text.size() - output_scan::trailing_space_length(text);
    if (body > 0) {
      held_space_.append(text.substr(0, body));
      sink.on_text(held_space_);
      held_space_.clear();
      after_call_ = false;
    }
    held_space_.append(text.substr(body));
  }

  std::string open_tag_;
  std::function<std::unique_ptr<CallBlockGrammar>()> new_grammar_;
  std::unique_ptr<CallBlockGrammar> grammar_;  // set while pending_ starts with an open block
  std::string pending_;                        // bytes not yet resolved
  std::string held_space_;                     // trailing whitespace, emitted only if text follows
  bool after_call_ = false;                    // nothing but whitespace since the last call
};

}  // namespace

Result<ToolSet> ToolSet::from_request_tools(const json& tools) {
  ToolSet set;
  if (tools.is_null()) return set;
  if (!tools.is_array()) return Status::error(std::string("tools: expected an array, got ") + tools.type_name());
  set.restricts_names_ = true;
  for (const json& entry : tools) set.add_function(entry);
  return set;
}

void ToolSet::add_function(const json& entry) {
  if (!entry.is_object()) return;
  const json* function = &entry;
  if (auto it = entry.find("function"); it != entry.end() && it->is_object()) function = &*it;
  auto name = function->find("name");
  if (name == function->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return;
  json parameters;
  for (const char* key : {"parameters", "input_schema"}) {
    if (auto it = function->find(key); it != function->end() && it->is_object()) {
      parameters = *it;
      break;
    }
  }
  parameters_by_function_.insert_or_assign(name->get<std::string>(), std::move(parameters));
}

bool ToolSet::accepts(std::string_view name) const {
  return !restricts_names_ || parameters_by_function_.find(name) != parameters_by_function_.end();
}

const json* ToolSet::parameter_schema(std::string_view function, std::string_view parameter) const {
  auto it = parameters_by_function_.find(function);
  if (it == parameters_by_function_.end() || !it->second.is_object()) return nullptr;
  auto properties = it->second.find("properties");
  if (properties == it->second.end() || !properties->is_object()) return nullptr;
  auto schema = properties->find(std::string(parameter));
  return schema == properties->end() ? nullptr : &*schema;
}

ordered_json ToolSet::convert_parameter(std::string_view function, std::string_view parameter,
                                        std::string_view raw_value) const {
  std::vector<std::string> types;
  if (const json* schema = parameter_schema(function, parameter)) collect_schema_types(*schema, types);
  const std::string_view trimmed = trim_space(raw_value);
  if (types.empty()) {
    if (auto parsed = parse_json_text(trimmed)) return *parsed;
    return ordered_json(std::string(raw_value));
  }
  bool only_string = true;
  for (const std::string& type : types) only_string = only_string && type == "string";
  if (only_string) return ordered_json(std::string(raw_value));
  if (auto parsed = parse_json_text(trimmed)) {
    for (const std::string& type : types) {
      if (value_has_schema_type(*parsed, type)) return *parsed;
    }
  }
  for (const std::string& type : types) {
    if (type != "boolean") continue;
    if (equals_ignoring_ascii_case(trimmed, "true")) return ordered_json(true);
    if (equals_ignoring_ascii_case(trimmed, "false")) return ordered_json(false);
  }
  return ordered_json(std::string(raw_value));
}

std::optional<ordered_json> parse_json_text(std::string_view text) {
  // allow_exceptions=false makes a parse error a discarded value; the catch covers the rest of
  // nlohmann's exceptions so that no input can throw out of a parser.
  try {
    ordered_json value = ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) return std::nullopt;
    return value;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string dump_compact_json(const ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, ordered_json::error_handler_t::replace);
}

std::optional<std::string> normalize_arguments(const ordered_json& arguments) {
  if (arguments.is_null()) return std::string("{}");
  if (arguments.is_object()) return dump_compact_json(arguments);
  if (arguments.is_string()) {
    auto parsed = parse_json_text(arguments.get_ref<const std::string&>());
    if (parsed && parsed->is_object()) return dump_compact_json(*parsed);
  }
  return std::nullopt;
}

JsonValueScanner::State JsonValueScanner::scan(std::string_view buffer) {
  for (; state_ == State::kInside && pos_ < buffer.size(); ++pos_) {
    const char c = buffer[pos_];
    if (pos_ == 0 && c != '{' && c != '[') return state_ = State::kInvalid;
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return state_ = State::kInvalid;  // JSON strings cannot hold raw control characters
      }
      continue;
    }
    switch (c) {
      case '{':
      case '[':
        open_brackets_.push_back(c);
        break;
      case '}':
      case ']':
        if (open_brackets_.empty() || open_brackets_.back() != (c == '}' ? '{' : '[')) {
          return state_ = State::kInvalid;
        }
        open_brackets_.pop_back();
        if (open_brackets_.empty()) {
          ++pos_;
          return state_ = State::kComplete;
        }
        break;
      case '"':
        in_string_ = true;
        break;
      default: {
        // Outside strings JSON has only punctuation, numbers and the literals true/false/null; the
        // letters are checked by the real parse later, anything else (a '<' above all) ends it now.
        const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        const bool digit = c >= '0' && c <= '9';
        if (!(is_space(c) || letter || digit || c == ':' || c == ',' || c == '-' || c == '+' || c == '.')) {
          return state_ = State::kInvalid;
        }
      }
    }
  }
  return state_;
}

std::unique_ptr<ContentParser> make_plain_text_parser() { return std::make_unique<PlainTextParser>(); }

std::unique_ptr<ContentParser> make_tagged_block_parser(std::string open_tag,
                                                        std::function<std::unique_ptr<CallBlockGrammar>()> new_grammar) {
  return std::make_unique<TaggedBlockParser>(std::move(open_tag), std::move(new_grammar));
}

}  // namespace helium
