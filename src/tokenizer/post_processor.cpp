// tokenizer/post_processor.cpp — tokenizer.json post-processors (see post_processor.h).
#include "tokenizer/post_processor.h"

namespace helium::tokenizer_json {

namespace {

using json_fields::Json;

// The single-sequence template: literal id runs with the sequence's ids ("$A") between them.
class Template final : public PostProcessor {
 public:
  struct Piece {
    bool is_sequence;
    std::vector<int32_t> ids;  // for a special-token piece
  };
  explicit Template(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}
  void add_special_tokens(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Piece& piece : pieces_) {
      if (piece.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), piece.ids.begin(), piece.ids.end());
      }
    }
    ids = std::move(out);
  }

 private:
  std::vector<Piece> pieces_;
};

class NoSpecialTokens final : public PostProcessor {
 public:
  void add_special_tokens(std::vector<int32_t>&) const override {}
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void add_special_tokens(std::vector<int32_t>& ids) const override {
    for (const auto& step : steps_) step->add_special_tokens(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

Result<std::unique_ptr<PostProcessor>> parse_template(const Json& node, const std::string& where) {
  const auto single = node.find("single");
  if (single == node.end() || !single->is_array()) return Status::error(where + ".single must be an array");
  const auto special_tokens = node.find("special_tokens");
  std::vector<Template::Piece> pieces;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json& item = (*single)[i];
    const std::string item_where = where + ".single[" + std::to_string(i) + "]";
    if (item.is_object() && item.contains("Sequence")) {
      HELIUM_ASSIGN_OR_RETURN(const std::string id,
                              json_fields::required_string(item["Sequence"], "id", item_where));
      // A single-sequence template may only refer to the one sequence there is.
      if (id != "A")
        return Status::error(item_where + " refers to sequence '" + id + "' in a single template");
      pieces.push_back({true, {}});
      continue;
    }
    if (item.is_object() && item.contains("SpecialToken")) {
      HELIUM_ASSIGN_OR_RETURN(const std::string name,
                              json_fields::required_string(item["SpecialToken"], "id", item_where));
      if (special_tokens == node.end() || !special_tokens->is_object() || !special_tokens->contains(name)) {
        return Status::error(item_where + ": special token '" + name + "' is not in " + where +
                             ".special_tokens");
      }
      const Json& ids = (*special_tokens)[name]["ids"];
      if (!ids.is_array())
        return Status::error(where + ".special_tokens['" + name + "'].ids must be an array");
      Template::Piece piece{false, {}};
      for (const Json& id : ids) {
        if (!id.is_number_integer()) {
          return Status::error(where + ".special_tokens['" + name + "'].ids must hold integers");
        }
        piece.ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      pieces.push_back(std::move(piece));
      continue;
    }
    return Status::error(item_where + " must be {\"Sequence\": ...} or {\"SpecialToken\": ...}");
  }
  return std::unique_ptr<PostProcessor>(new Template(std::move(pieces)));
}

// BertProcessing and RobertaProcessing: [cls] $A [sep], where cls and sep are ["token", id] pairs.
Result<std::unique_ptr<PostProcessor>> parse_cls_sep(const Json& node, const std::string& where) {
  auto id_of = [&](const char* key) -> Result<int32_t> {
    const auto it = node.find(key);
    if (it == node.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
      return Status::error(where + "." + key + " must be [\"token\", id]");
    }
    return static_cast<int32_t>((*it)[1].get<int64_t>());
  };
  HELIUM_ASSIGN_OR_RETURN(const int32_t cls, id_of("cls"));
  HELIUM_ASSIGN_OR_RETURN(const int32_t sep, id_of("sep"));
  std::vector<Template::Piece> pieces = {{false, {cls}}, {true, {}}, {false, {sep}}};
  return std::unique_ptr<PostProcessor>(new Template(std::move(pieces)));
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> parse_post_processor(const Json& node, const std::string& where) {
  HELIUM_ASSIGN_OR_RETURN(const std::string type, json_fields::component_type(node, where));
  if (type == "TemplateProcessing") return parse_template(node, where);
  if (type == "BertProcessing" || type == "RobertaProcessing") return parse_cls_sep(node, where);
  // ByteLevel post-processing only trims offsets, which helium does not report.
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(new NoSpecialTokens());
  if (type == "Sequence") {
    const auto it = node.find("processors");
    if (it == node.end() || !it->is_array()) return Status::error(where + ".processors must be an array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < it->size(); ++i) {
      HELIUM_ASSIGN_OR_RETURN(
          auto step, parse_post_processor((*it)[i], where + ".processors[" + std::to_string(i) + "]"));
      steps.push_back(std::move(step));
    }
    return std::unique_ptr<PostProcessor>(new Sequence(std::move(steps)));
  }
  return Status::error("unsupported post_processor type '" + type + "'");
}

}  // namespace helium::tokenizer_json
