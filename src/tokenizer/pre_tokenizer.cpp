// tokenizer/pre_tokenizer.cpp — tokenizer.json pre-tokenizers (see pre_tokenizer.h).
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace helium::tokenizer_json {

namespace {

using json_fields::Json;

// What happens to the matched parts of a piece (the reference's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool is_match;
};

// Covers `text` with the given sorted, non-overlapping matches and the gaps between them.
std::vector<Span> spans_from_matches(size_t text_size,
                                     const std::vector<std::pair<size_t, size_t>>& matches) {
  std::vector<Span> spans;
  if (text_size == 0) return {{0, 0, false}};
  size_t previous = 0;
  for (const auto& [begin, end] : matches) {
    if (previous != begin) spans.push_back({previous, begin, false});
    spans.push_back({begin, end, true});
    previous = end;
  }
  if (previous != text_size) spans.push_back({previous, text_size, false});
  return spans;
}

// Every character for which `predicate` holds is a match of its own; the runs between are gaps. This is
// how the reference matches a character or a character predicate.
std::vector<Span> spans_from_predicate(const std::string& text,
                                       const std::function<bool(char32_t)>& predicate) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    if (predicate(unicode::decode_next(text, pos))) matches.emplace_back(begin, pos);
  }
  return spans_from_matches(text.size(), matches);
}

// Cuts `piece` according to `spans` and `behavior`, as the reference's NormalizedString::split does, and
// appends the non-empty pieces to `out`.
void split_piece(const PreToken& piece, std::vector<Span> spans, bool invert, SplitBehavior behavior,
                 std::vector<PreToken>& out) {
  if (invert) {
    for (Span& s : spans) s.is_match = !s.is_match;
  }
  std::vector<Span> kept;  // is_match here means "drop"
  kept.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      kept = std::move(spans);
      break;
    case SplitBehavior::kIsolated:
      for (const Span& s : spans) kept.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !kept.empty()) {
          kept.back().end = s.end;
        } else {
          kept.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty()) {
          kept.back().begin = it->begin;
        } else {
          kept.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Span& s : kept) {
    if (s.is_match || s.end == s.begin) continue;
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_input_start && s.begin == 0});
  }
}

// A pre-tokenizer that maps each piece independently to zero or more pieces.
class PieceWise : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<PreToken>& pieces) const final {
    std::vector<PreToken> out;
    out.reserve(pieces.size() * 2);
    for (const PreToken& piece : pieces) split(piece, out);
    pieces = std::move(out);
  }

 protected:
  virtual void split(const PreToken& piece, std::vector<PreToken>& out) const = 0;
};

class Split final : public PieceWise {
 public:
  Split(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

 protected:
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    split_piece(piece, spans_from_matches(piece.text.size(), pattern_.find_all(piece.text)), invert_,
                behavior_, out);
  }

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Cuts on a character predicate (Punctuation, Digits, WhitespaceSplit, CharDelimiterSplit).
class PredicateSplit final : public PieceWise {
 public:
  PredicateSplit(std::function<bool(char32_t)> predicate, SplitBehavior behavior)
      : predicate_(std::move(predicate)), behavior_(behavior) {}

 protected:
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    split_piece(piece, spans_from_predicate(piece.text, predicate_), false, behavior_, out);
  }

 private:
  std::function<bool(char32_t)> predicate_;
  SplitBehavior behavior_;
};

// GPT-2's byte-level step: optionally a leading space and the GPT-2 word regex, then every byte written
// as its byte-level character.
class ByteLevel final : public PieceWise {
 public:
  ByteLevel(bool add_prefix_space, std::optional<Regex> words)
      : add_prefix_space_(add_prefix_space), words_(std::move(words)) {}

 protected:
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    PreToken prefixed = piece;
    if (add_prefix_space_ && (prefixed.text.empty() || prefixed.text[0] != ' ')) {
      prefixed.text.insert(prefixed.text.begin(), ' ');
    }
    const size_t first = out.size();
    if (words_.has_value()) {
      split_piece(prefixed, spans_from_matches(prefixed.text.size(), words_->find_all(prefixed.text)), false,
                  SplitBehavior::kIsolated, out);
    } else if (!prefixed.text.empty()) {
      out.push_back(std::move(prefixed));
    }
    for (size_t i = first; i < out.size(); ++i) out[i].text = byte_level::encode(out[i].text);
  }

 private:
  bool add_prefix_space_;
  std::optional<Regex> words_;
};

// SentencePiece's spaces: " " becomes the replacement character (default "▁"), which is prepended to
// the piece per `scheme`; with `split`, every replacement character then starts a new piece.
class Metaspace final : public PieceWise {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split_on_replacement)
      : replacement_(replacement), scheme_(scheme), split_(split_on_replacement) {
    unicode::append_utf8(replacement_utf8_, replacement);
  }

 protected:
  void split(const PreToken& piece, std::vector<PreToken>& out) const override {
    PreToken replaced{std::string(), piece.at_input_start};
    replaced.text.reserve(piece.text.size() + replacement_utf8_.size());
    for (char c : piece.text) {
      if (c == ' ') {
        replaced.text += replacement_utf8_;
      } else {
        replaced.text.push_back(c);
      }
    }
    const bool starts_with_replacement =
        replaced.text.compare(0, replacement_utf8_.size(), replacement_utf8_) == 0;
    const bool prepend =
        !starts_with_replacement &&
        (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && piece.at_input_start));
    if (prepend) replaced.text.insert(0, replacement_utf8_);
    if (!split_) {
      if (!replaced.text.empty()) out.push_back(std::move(replaced));
      return;
    }
    const char32_t r = replacement_;
    split_piece(replaced, spans_from_predicate(replaced.text, [r](char32_t cp) { return cp == r; }), false,
                SplitBehavior::kMergedWithNext, out);
  }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

class BertPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> words;
    for (const PreToken& piece : pieces) {
      split_piece(piece, spans_from_predicate(piece.text, unicode::is_white_space), false,
                  SplitBehavior::kRemoved, words);
    }
    pieces.clear();
    for (const PreToken& word : words) {
      split_piece(word, spans_from_predicate(word.text, is_bert_punctuation), false, SplitBehavior::kIsolated,
                  pieces);
    }
  }

 private:
  static bool is_bert_punctuation(char32_t cp) {
    return (cp < 0x80 && std::ispunct(static_cast<int>(cp))) || unicode::is_punctuation(cp);
  }
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

Result<SplitBehavior> parse_behavior(const Json& node, std::string_view fallback, const std::string& where) {
  HELIUM_ASSIGN_OR_RETURN(const std::string name,
                          json_fields::string_or(node, "behavior", std::string(fallback), where));
  if (name.empty()) return Status::error(where + ".behavior is missing");
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return Status::error(where + ".behavior '" + name + "' is not a split behavior");
}

// ASCII punctuation in Rust's sense (char::is_ascii_punctuation) plus Unicode P*.
bool is_punctuation(char32_t cp) {
  return (cp < 0x80 && std::ispunct(static_cast<int>(cp))) || unicode::is_punctuation(cp);
}

// The reference's GPT-2 word regex for ByteLevel(use_regex = true), in Oniguruma syntax.
constexpr std::string_view kGpt2Words =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

Result<PrependScheme> parse_prepend_scheme(const json_fields::Json& node, const std::string& where) {
  HELIUM_ASSIGN_OR_RETURN(const std::string scheme,
                          json_fields::string_or(node, "prepend_scheme", "", where));
  // Files written before prepend_scheme existed say add_prefix_space instead.
  HELIUM_ASSIGN_OR_RETURN(const bool add_prefix_space,
                          json_fields::bool_or(node, "add_prefix_space", true, where));
  if (scheme.empty()) return add_prefix_space ? PrependScheme::kAlways : PrependScheme::kNever;
  PrependScheme parsed;
  if (scheme == "always") {
    parsed = PrependScheme::kAlways;
  } else if (scheme == "first") {
    parsed = PrependScheme::kFirst;
  } else if (scheme == "never") {
    parsed = PrependScheme::kNever;
  } else {
    return Status::error(where + ".prepend_scheme '" + scheme + "' is not always, first or never");
  }
  if (!add_prefix_space && parsed != PrependScheme::kNever) {
    return Status::error(where + ": add_prefix_space false contradicts prepend_scheme '" + scheme + "'");
  }
  return parsed;
}

Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& node, const std::string& where) {
  HELIUM_ASSIGN_OR_RETURN(const std::string type, json_fields::component_type(node, where));
  using Ptr = std::unique_ptr<PreTokenizer>;
  if (type == "Split") {
    HELIUM_ASSIGN_OR_RETURN(Regex pattern, parse_pattern(node.value("pattern", Json()), where));
    HELIUM_ASSIGN_OR_RETURN(const SplitBehavior behavior, parse_behavior(node, "", where));
    HELIUM_ASSIGN_OR_RETURN(const bool invert, json_fields::bool_or(node, "invert", false, where));
    return Ptr(new Split(std::move(pattern), behavior, invert));
  }
  if (type == "ByteLevel") {
    HELIUM_ASSIGN_OR_RETURN(const bool add_prefix_space,
                            json_fields::bool_or(node, "add_prefix_space", true, where));
    HELIUM_ASSIGN_OR_RETURN(const bool use_regex, json_fields::bool_or(node, "use_regex", true, where));
    std::optional<Regex> words;
    if (use_regex) {
      HELIUM_ASSIGN_OR_RETURN(Regex compiled, Regex::from_oniguruma(kGpt2Words));
      words = std::move(compiled);
    }
    return Ptr(new ByteLevel(add_prefix_space, std::move(words)));
  }
  if (type == "Metaspace") {
    HELIUM_ASSIGN_OR_RETURN(const char32_t replacement,
                            json_fields::char_or(node, "replacement", 0x2581, where));
    HELIUM_ASSIGN_OR_RETURN(const PrependScheme scheme, parse_prepend_scheme(node, where));
    HELIUM_ASSIGN_OR_RETURN(const bool split, json_fields::bool_or(node, "split", true, where));
    return Ptr(new Metaspace(replacement, scheme, split));
  }
  if (type == "Whitespace") {
    HELIUM_ASSIGN_OR_RETURN(Regex words, Regex::from_oniguruma(R"(\w+|[^\w\s]+)"));
    return Ptr(new Split(std::move(words), SplitBehavior::kRemoved, /*invert=*/true));
  }
  if (type == "WhitespaceSplit")
    return Ptr(new PredicateSplit(unicode::is_white_space, SplitBehavior::kRemoved));
  if (type == "BertPreTokenizer") return Ptr(new BertPreTokenizer());
  if (type == "Punctuation") {
    HELIUM_ASSIGN_OR_RETURN(const SplitBehavior behavior, parse_behavior(node, "Isolated", where));
    return Ptr(new PredicateSplit(is_punctuation, behavior));
  }
  if (type == "Digits") {
    HELIUM_ASSIGN_OR_RETURN(const bool individual,
                            json_fields::bool_or(node, "individual_digits", false, where));
    return Ptr(new PredicateSplit(unicode::is_numeric,
                                  individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous));
  }
  if (type == "CharDelimiterSplit") {
    HELIUM_ASSIGN_OR_RETURN(const char32_t delimiter, json_fields::char_or(node, "delimiter", 0, where));
    if (delimiter == 0) return Status::error(where + ".delimiter is missing");
    return Ptr(
        new PredicateSplit([delimiter](char32_t cp) { return cp == delimiter; }, SplitBehavior::kRemoved));
  }
  if (type == "Sequence") {
    const auto it = node.find("pretokenizers");
    if (it == node.end() || !it->is_array()) return Status::error(where + ".pretokenizers must be an array");
    std::vector<Ptr> steps;
    for (size_t i = 0; i < it->size(); ++i) {
      HELIUM_ASSIGN_OR_RETURN(
          Ptr step, parse_pre_tokenizer((*it)[i], where + ".pretokenizers[" + std::to_string(i) + "]"));
      steps.push_back(std::move(step));
    }
    return Ptr(new Sequence(std::move(steps)));
  }
  return Status::error("unsupported pre_tokenizer type '" + type + "'");
}

}  // namespace helium::tokenizer_json
