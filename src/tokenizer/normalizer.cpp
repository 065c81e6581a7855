// tokenizer/normalizer.cpp — tokenizer.json normalizers (see normalizer.h).
#include "tokenizer/normalizer.h"

#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace helium::tokenizer_json {

namespace {

using json_fields::Json;

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(unicode::NormalForm form) : form_(form) {}
  std::string normalize(std::string text) const override { return unicode::normalize(text, form_); }

 private:
  unicode::NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return unicode::to_lowercase(text); }
};

// Strips White_Space (Rust's char::is_whitespace) from either end.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!unicode::is_white_space(unicode::decode_next(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        if (!unicode::is_white_space(unicode::decode_before(text, end))) break;
        end = unicode::char_start_before(text, end);
      }
    }
    return text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Removes combining marks (general category M), as the reference does after an NFD/NFKD normalizer.
class StripAccents final : public Normalizer {
 public:
  std::string normalize(std::string text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const size_t begin = pos;
      if (!unicode::is_mark(unicode::decode_next(text, pos))) out.append(text, begin, pos - begin);
    }
    return out;
  }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  // The reference leaves an empty string empty.
  std::string normalize(std::string text) const override { return text.empty() ? text : prefix_ + text; }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override { return replace_all(pattern_, text, content_); }

 private:
  Regex pattern_;
  std::string content_;
};

// Writes every byte as its GPT-2 byte-level character.
class ByteLevelNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return byte_level::encode(text); }
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string text) const override {
    for (const auto& step : steps_) text = step->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> parse_normalizer(const Json& node, const std::string& where) {
  HELIUM_ASSIGN_OR_RETURN(const std::string type, json_fields::component_type(node, where));
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfc));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfd));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfkc));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeForm(unicode::NormalForm::kNfkd));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new Lowercase());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccents());
  if (type == "ByteLevel") return std::unique_ptr<Normalizer>(new ByteLevelNormalizer());
  if (type == "Strip") {
    HELIUM_ASSIGN_OR_RETURN(const bool left, json_fields::bool_or(node, "strip_left", true, where));
    HELIUM_ASSIGN_OR_RETURN(const bool right, json_fields::bool_or(node, "strip_right", true, where));
    return std::unique_ptr<Normalizer>(new Strip(left, right));
  }
  if (type == "Prepend") {
    HELIUM_ASSIGN_OR_RETURN(std::string prefix, json_fields::required_string(node, "prepend", where));
    return std::unique_ptr<Normalizer>(new Prepend(std::move(prefix)));
  }
  if (type == "Replace") {
    HELIUM_ASSIGN_OR_RETURN(Regex pattern, parse_pattern(node.value("pattern", Json()), where));
    HELIUM_ASSIGN_OR_RETURN(std::string content, json_fields::required_string(node, "content", where));
    return std::unique_ptr<Normalizer>(new Replace(std::move(pattern), std::move(content)));
  }
  if (type == "Sequence") {
    const auto it = node.find("normalizers");
    if (it == node.end() || !it->is_array()) return Status::error(where + ".normalizers must be an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < it->size(); ++i) {
      HELIUM_ASSIGN_OR_RETURN(auto step,
                              parse_normalizer((*it)[i], where + ".normalizers[" + std::to_string(i) + "]"));
      steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(new Sequence(std::move(steps)));
  }
  return Status::error("unsupported normalizer type '" + type + "'");
}

}  // namespace helium::tokenizer_json
