// tokenizer/decoder.cpp — tokenizer.json decoders (see decoder.h).
#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace helium::tokenizer_json {

namespace {

using json_fields::Json;

// Byte-level tokens back to bytes, then to text. A token with a character outside the byte table (an
// added token such as "<think>" is fine, its characters are all in the table) contributes its own UTF-8
// bytes, as in the reference; the bytes of all tokens are decoded together, so a character split
// across tokens comes out whole and a broken one as U+FFFD.
class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      const size_t mark = bytes.size();
      bool all_in_table = true;
      for (size_t pos = 0; pos < token.size();) {
        const auto byte = byte_level::byte_for_char(unicode::decode_next(token, pos));
        if (!byte) {
          all_in_table = false;
          break;
        }
        bytes.push_back(static_cast<char>(*byte));
      }
      if (!all_in_table) {
        bytes.resize(mark);
        bytes += token;
      }
    }
    tokens.assign(1, unicode::to_valid_utf8(bytes));
  }
};

// Runs of <0xNN> tokens become the bytes they name, decoded as UTF-8.
//
// Deviation from the reference Rust library, on purpose: when a run is not valid UTF-8, Rust emits one
// U+FFFD per byte of the whole run, so a later byte can change how earlier bytes decode; here the run
// is decoded with the WHATWG maximal-subpart rule (as the JavaScript port does), which keeps decoding
// of a prefix stable and so lets streaming output match decode() of the whole. Valid runs, the only
// ones that encoding text produces, decode identically.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    bool in_run = false;
    for (std::string& token : tokens) {
      int byte = byte_of(token);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        in_run = true;
        continue;
      }
      if (in_run) {
        out.push_back(unicode::to_valid_utf8(run));
        run.clear();
        in_run = false;
      }
      out.push_back(std::move(token));
    }
    if (in_run) out.push_back(unicode::to_valid_utf8(run));
    tokens = std::move(out);
  }

 private:
  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }
  // The byte a "<0xNN>" token names, or -1.
  static int byte_of(const std::string& token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
    const int high = hex_value(token[3]), low = hex_value(token[4]);
    if (high < 0 || low < 0) return -1;
    return high * 16 + low;
  }
};

// The replacement character back to spaces. Following the reference exactly, in the first token every
// replacement character is dropped (not only a leading one) unless the prepend scheme is "never".
class Metaspace final : public Decoder {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme) : replacement_(replacement), scheme_(scheme) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool drop = i == 0 && scheme_ != PrependScheme::kNever;
      std::string out;
      out.reserve(tokens[i].size());
      for (size_t pos = 0; pos < tokens[i].size();) {
        const size_t begin = pos;
        if (unicode::decode_next(tokens[i], pos) == replacement_) {
          if (!drop) out.push_back(' ');
        } else {
          out.append(tokens[i], begin, pos - begin);
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  PrependScheme scheme_;
};

class Replace final : public Decoder {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = replace_all(pattern_, token, content_);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing `content` characters from every token.
class Strip final : public Decoder {
 public:
  Strip(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      size_t begin = 0;
      for (size_t n = 0; n < start_ && begin < token.size(); ++n) {
        size_t pos = begin;
        if (unicode::decode_next(token, pos) != content_) break;
        begin = pos;
      }
      size_t end = token.size();
      for (size_t n = 0; n < stop_ && end > begin; ++n) {
        if (unicode::decode_before(token, end) != content_) break;
        end = unicode::char_start_before(token, end);
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

// Subword-suffix BPE ("</w>" ends a word): the suffix becomes a space, except in the last token.
class BpeSuffix final : public Decoder {
 public:
  explicit BpeSuffix(std::string_view suffix) : suffix_(Regex::literal(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = replace_all(suffix_, tokens[i], i + 1 == tokens.size() ? "" : " ");
    }
  }

 private:
  Regex suffix_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

Result<std::unique_ptr<Decoder>> parse_decoder(const Json& node, const std::string& where) {
  HELIUM_ASSIGN_OR_RETURN(const std::string type, json_fields::component_type(node, where));
  using Ptr = std::unique_ptr<Decoder>;
  if (type == "ByteLevel") return Ptr(new ByteLevel());
  if (type == "ByteFallback") return Ptr(new ByteFallback());
  if (type == "Fuse") return Ptr(new Fuse());
  if (type == "Metaspace") {
    HELIUM_ASSIGN_OR_RETURN(const char32_t replacement,
                            json_fields::char_or(node, "replacement", 0x2581, where));
    HELIUM_ASSIGN_OR_RETURN(const PrependScheme scheme, parse_prepend_scheme(node, where));
    return Ptr(new Metaspace(replacement, scheme));
  }
  if (type == "Replace") {
    HELIUM_ASSIGN_OR_RETURN(Regex pattern, parse_pattern(node.value("pattern", Json()), where));
    HELIUM_ASSIGN_OR_RETURN(std::string content, json_fields::required_string(node, "content", where));
    return Ptr(new Replace(std::move(pattern), std::move(content)));
  }
  if (type == "Strip") {
    HELIUM_ASSIGN_OR_RETURN(const char32_t content, json_fields::char_or(node, "content", ' ', where));
    HELIUM_ASSIGN_OR_RETURN(const int64_t start, json_fields::int_or(node, "start", 0, where));
    HELIUM_ASSIGN_OR_RETURN(const int64_t stop, json_fields::int_or(node, "stop", 0, where));
    if (start < 0 || stop < 0) return Status::error(where + ": start and stop must not be negative");
    return Ptr(new Strip(content, static_cast<size_t>(start), static_cast<size_t>(stop)));
  }
  if (type == "BPEDecoder") {
    HELIUM_ASSIGN_OR_RETURN(const std::string suffix, json_fields::string_or(node, "suffix", "</w>", where));
    return Ptr(new BpeSuffix(suffix));
  }
  if (type == "Sequence") {
    const auto it = node.find("decoders");
    if (it == node.end() || !it->is_array()) return Status::error(where + ".decoders must be an array");
    std::vector<Ptr> steps;
    for (size_t i = 0; i < it->size(); ++i) {
      HELIUM_ASSIGN_OR_RETURN(Ptr step,
                              parse_decoder((*it)[i], where + ".decoders[" + std::to_string(i) + "]"));
      steps.push_back(std::move(step));
    }
    return Ptr(new Sequence(std::move(steps)));
  }
  return Status::error("unsupported decoder type '" + type + "'");
}

}  // namespace helium::tokenizer_json
