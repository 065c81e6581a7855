// chat/jinja_lexer.cpp — see jinja_lexer.h. The preprocessing passes reproduce the reference's regular
// expressions (and so Python Jinja's trim_blocks/lstrip_blocks in all cases real templates exercise);
// each pass keeps, for every byte it outputs, the byte's offset in the original source.
#include "chat/jinja_lexer.h"

#include <utility>

#include "chat/jinja_text.h"
#include "chat/jinja_value.h"

namespace helium::jinja {

namespace {

// Text plus, for each byte, where it came from in the original source.
struct MappedText {
  std::string text;
  std::vector<uint32_t> origin;

  void append(const MappedText& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    origin.insert(origin.end(), from.origin.begin() + static_cast<ptrdiff_t>(begin),
                  from.origin.begin() + static_cast<ptrdiff_t>(end));
  }
};

// JavaScript's multiline ^ matches at the start and after \n, \r, U+2028 and U+2029.
bool at_line_start(const std::string& s, size_t pos) {
  if (pos == 0) return true;
  if (s[pos - 1] == '\n' || s[pos - 1] == '\r') return true;
  return pos >= 3 &&
         (s.compare(pos - 3, 3, "\xE2\x80\xA8") == 0 || s.compare(pos - 3, 3, "\xE2\x80\xA9") == 0);
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
MappedText lstrip_blocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t pos = 0;
  while (pos < s.size()) {
    if (at_line_start(s, pos)) {
      size_t end = pos;
      while (end < s.size() && (s[end] == ' ' || s[end] == '\t')) ++end;
      if (end > pos && end + 1 < s.size() && s[end] == '{' &&
          (s[end + 1] == '#' || s[end + 1] == '%' || s[end + 1] == '-')) {
        pos = end;  // drop the indentation before the tag
      }
    }
    out.append(in, pos, pos + 1);
    ++pos;
  }
  return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1".
MappedText trim_blocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t pos = 0;
  while (pos < s.size()) {
    if (pos + 2 < s.size() && (s[pos] == '#' || s[pos] == '%' || s[pos] == '-') && s[pos + 1] == '}' &&
        s[pos + 2] == '\n') {
      out.append(in, pos, pos + 2);
      pos += 3;
      continue;
    }
    out.append(in, pos, pos + 1);
    ++pos;
  }
  return out;
}

// Length of a `{%-? (end)?generation -?%}` tag at `pos` (0 when there is none); sets the strip flags.
size_t generation_tag_length(const std::string& s, size_t pos, bool& strip_before, bool& strip_after) {
  if (s.compare(pos, 2, "{%") != 0) return 0;
  size_t p = pos + 2;
  strip_before = p < s.size() && s[p] == '-';
  if (strip_before) ++p;
  p += js_whitespace_prefix(s, p);
  if (s.compare(p, 3, "end") == 0 && s.compare(p + 3, 10, "generation") == 0) p += 3;
  if (s.compare(p, 10, "generation") != 0) return 0;
  p += 10;
  p += js_whitespace_prefix(s, p);
  strip_after = p < s.size() && s[p] == '-';
  if (strip_after) ++p;
  if (s.compare(p, 2, "%}") != 0) return 0;
  return p + 2 - pos;
}

// transformers' {% generation %} / {% endgeneration %} markers:
// /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs
// -> (lstrip ? "" : before) + (rstrip ? "" : after).
MappedText remove_generation_tags(const MappedText& in) {
  const std::string& s = in.text;
  if (s.find("generation") == std::string::npos) return in;
  MappedText out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t tag = pos + js_whitespace_prefix(s, pos);
    bool strip_before = false;
    bool strip_after = false;
    const size_t length = tag < s.size() ? generation_tag_length(s, tag, strip_before, strip_after) : 0;
    if (length == 0) {
      // No match starting anywhere in this whitespace run: copy it and the character after it.
      size_t end = tag;
      if (end < s.size()) end += utf8_sequence_length(static_cast<unsigned char>(s[end]));
      out.append(in, pos, std::min(end, s.size()));
      pos = std::min(end, s.size());
      continue;
    }
    const size_t after = tag + length;
    const size_t after_end = after + js_whitespace_prefix(s, after);
    if (!strip_before) out.append(in, pos, tag);
    if (!strip_after) out.append(in, after, after_end);
    pos = after_end;
  }
  return out;
}

MappedText preprocess(std::string_view source) {
  // Line endings are normalised to \n first, as Python Jinja's lexer does (the reference keeps \r, so a
  // CRLF template would leak \r into the prompt and defeat trim_blocks).
  MappedText text;
  text.text.reserve(source.size());
  text.origin.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      c = '\n';
    }
    text.text.push_back(c);
    text.origin.push_back(static_cast<uint32_t>(i));
  }
  if (!text.text.empty() && text.text.back() == '\n') {  // Jinja drops one trailing newline
    text.text.pop_back();
    text.origin.pop_back();
  }
  return remove_generation_tags(trim_blocks(lstrip_blocks(text)));
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Lexer {
 public:
  Lexer(std::string_view source, MappedText text) : source_(source), text_(std::move(text)) {}

  std::vector<Token> run() {
    const std::string& s = text_.text;
    while (pos_ < s.size()) {
      if (tokens_.empty() || last_type() == TokenType::kCloseStatement ||
          last_type() == TokenType::kCloseExpression || last_type() == TokenType::kComment) {
        const size_t start = pos_;
        while (pos_ < s.size() && !(s[pos_] == '{' && pos_ + 1 < s.size() &&
                                    (s[pos_ + 1] == '%' || s[pos_ + 1] == '{' || s[pos_ + 1] == '#'))) {
          ++pos_;
        }
        if (pos_ > start) {
          push(TokenType::kText, s.substr(start, pos_ - start), start);
          continue;
        }
      }
      if (starts_with("{#")) {
        lex_comment();
        continue;
      }
      if (starts_with("{%-")) {
        strip_trailing_whitespace();
        push(TokenType::kOpenStatement, "{%", pos_);
        pos_ += 3;
        continue;
      }
      if (starts_with("{{-")) {
        strip_trailing_whitespace();
        push(TokenType::kOpenExpression, "{{", pos_);
        curly_depth_ = 0;
        pos_ += 3;
        continue;
      }
      skip_tag_whitespace();
      if (starts_with("-%}")) {
        push(TokenType::kCloseStatement, "%}", pos_);
        pos_ += 3;
        pos_ += js_whitespace_prefix(s, pos_);
        continue;
      }
      if (starts_with("-}}")) {
        push(TokenType::kCloseExpression, "}}", pos_);
        pos_ += 3;
        pos_ += js_whitespace_prefix(s, pos_);
        continue;
      }
      const char c = s[pos_];
      if ((c == '-' || c == '+') && lex_sign()) continue;
      if (lex_operator()) continue;
      if (c == '\'' || c == '"') {
        lex_string(c);
        continue;
      }
      if (is_digit(c)) {
        const size_t start = pos_;
        std::string number = consume_digits();
        if (last_type_or_text() != TokenType::kDot && pos_ + 1 < s.size() && s[pos_] == '.' &&
            is_digit(s[pos_ + 1])) {
          ++pos_;
          number.push_back('.');
          number += consume_digits();
        }
        push(TokenType::kNumber, std::move(number), start);
        continue;
      }
      if (is_ascii_word(static_cast<unsigned char>(c))) {
        const size_t start = pos_;
        while (pos_ < s.size() && is_ascii_word(static_cast<unsigned char>(s[pos_]))) ++pos_;
        push(TokenType::kIdentifier, s.substr(start, pos_ - start), start);
        continue;
      }
      size_t end = pos_;
      next_code_point(s, end);
      fail(std::string("unexpected character '") + s.substr(pos_, end - pos_) + "'", pos_);
    }
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message, size_t pos) const {
    throw JinjaError(message, original_offset(pos));
  }

  size_t original_offset(size_t pos) const {
    if (pos < text_.origin.size()) return text_.origin[pos];
    return source_.size();
  }

  TokenType last_type() const { return tokens_.back().type; }
  // The type of the last token, or kText at the start (both forbid a sign there).
  TokenType last_type_or_text() const { return tokens_.empty() ? TokenType::kText : tokens_.back().type; }

  bool starts_with(std::string_view prefix) const {
    return text_.text.compare(pos_, prefix.size(), prefix) == 0;
  }

  void push(TokenType type, std::string value, size_t pos) {
    tokens_.push_back(Token{type, std::move(value), original_offset(pos)});
  }

  void strip_trailing_whitespace() {
    if (tokens_.empty() || last_type() != TokenType::kText) return;
    std::string& text = tokens_.back().value;
    text.resize(text.size() - js_whitespace_suffix(text, text.size()));
    if (text.empty()) tokens_.pop_back();
  }

  // Whitespace inside a tag. Like the reference, whitespace that runs to the end of input is an error.
  void skip_tag_whitespace() {
    pos_ += js_whitespace_prefix(text_.text, pos_);
    if (pos_ >= text_.text.size()) fail("unexpected end of template inside a tag", pos_);
  }

  void lex_comment() {
    const std::string& s = text_.text;
    const size_t start = pos_;
    pos_ += 2;
    const bool strip_before = pos_ < s.size() && s[pos_] == '-';
    if (strip_before) ++pos_;
    const size_t end = s.find("#}", pos_);
    if (end == std::string::npos) fail("unterminated comment (missing '#}')", start);
    const bool strip_after = end > pos_ && s[end - 1] == '-';
    if (strip_before) strip_trailing_whitespace();
    push(TokenType::kComment, "", start);
    pos_ = end + 2;
    if (strip_after) pos_ += js_whitespace_prefix(s, pos_);
  }

  // A + or - is binary after a value (name, number, string, ')' or ']'); anywhere else it is a sign, and
  // joins a number that follows it. Returns false when it is binary (lexed as an operator).
  bool lex_sign() {
    const TokenType last = last_type_or_text();
    if (tokens_.empty() || last == TokenType::kText)
      fail(std::string("unexpected '") + text_.text[pos_] + "'", pos_);
    switch (last) {
      case TokenType::kIdentifier:
      case TokenType::kNumber:
      case TokenType::kString:
      case TokenType::kCloseParen:
      case TokenType::kCloseBracket:
        return false;
      default:
        break;
    }
    const std::string& s = text_.text;
    const size_t start = pos_;
    const char sign = s[pos_++];
    std::string number = consume_digits();
    if (!number.empty() && pos_ + 1 < s.size() && s[pos_] == '.' && is_digit(s[pos_ + 1])) {
      ++pos_;
      number.push_back('.');
      number += consume_digits();
    }
    if (!number.empty()) number.insert(number.begin(), sign);
    push(number.empty() ? TokenType::kUnarySign : TokenType::kNumber,
         number.empty() ? std::string(1, sign) : number, start);
    return true;
  }

  bool lex_operator() {
    struct Operator {
      std::string_view text;
      TokenType type;
    };
    // Order matters: longer operators first where one is a prefix of another.
    static constexpr Operator kOperators[] = {
        {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
        {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
        {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
        {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
        {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
        {",", TokenType::kComma},           {".", TokenType::kDot},
        {":", TokenType::kColon},           {"|", TokenType::kPipe},
        {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
        {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
        {"<", TokenType::kComparison},      {">", TokenType::kComparison},
        {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
        {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
        {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
        {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
        {"=", TokenType::kEquals},
    };
    for (const Operator& op : kOperators) {
      // Inside a dict literal, "}}" closes two braces rather than the expression.
      if (op.type == TokenType::kCloseExpression && curly_depth_ > 0) continue;
      if (!starts_with(op.text)) continue;
      push(op.type, std::string(op.text), pos_);
      if (op.type == TokenType::kOpenExpression) curly_depth_ = 0;
      if (op.type == TokenType::kOpenBrace) ++curly_depth_;
      if (op.type == TokenType::kCloseBrace) --curly_depth_;
      pos_ += op.text.size();
      return true;
    }
    return false;
  }

  std::string consume_digits() {
    const std::string& s = text_.text;
    const size_t start = pos_;
    while (pos_ < s.size() && is_digit(s[pos_])) ++pos_;
    return s.substr(start, pos_ - start);
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads `digits` hex digits at pos_ (advancing), or fails naming the escape.
  char32_t read_hex(size_t digits, size_t escape_start) {
    const std::string& s = text_.text;
    char32_t value = 0;
    for (size_t i = 0; i < digits; ++i) {
      const int h = pos_ < s.size() ? hex_value(s[pos_]) : -1;
      if (h < 0)
        fail(std::string("invalid escape sequence ") + s.substr(escape_start, pos_ + 1 - escape_start),
             escape_start);
      value = value * 16 + static_cast<char32_t>(h);
      ++pos_;
    }
    return value;
  }

  // String literals unescape like the reference (\n \t \r \b \f \v \' \" \\ \xHH \uHHHH, surrogate pairs
  // joined) and, for the escapes it lacks, like Python (\a, \UHHHHHHHH, octal, line continuation; any other
  // backslash is kept as written).
  void lex_string(char quote) {
    const std::string& s = text_.text;
    const size_t start = pos_;
    ++pos_;
    std::string value;
    char32_t pending_high_surrogate = 0;
    auto flush_surrogate = [&] {
      if (pending_high_surrogate != 0) append_utf8(value, 0xFFFD);
      pending_high_surrogate = 0;
    };
    while (true) {
      if (pos_ >= s.size()) fail("unterminated string literal", start);
      const char c = s[pos_];
      if (c == quote) break;
      if (c != '\\') {
        flush_surrogate();
        value.push_back(c);
        ++pos_;
        continue;
      }
      const size_t escape_start = pos_;
      ++pos_;
      if (pos_ >= s.size()) fail("unterminated string literal", start);
      const char e = s[pos_++];
      char32_t cp = 0;
      switch (e) {
        case 'n':
          cp = '\n';
          break;
        case 't':
          cp = '\t';
          break;
        case 'r':
          cp = '\r';
          break;
        case 'b':
          cp = '\b';
          break;
        case 'f':
          cp = '\f';
          break;
        case 'v':
          cp = '\v';
          break;
        case 'a':
          cp = '\a';
          break;
        case '\'':
          cp = '\'';
          break;
        case '"':
          cp = '"';
          break;
        case '\\':
          cp = '\\';
          break;
        case '\n':
          continue;  // line continuation
        case 'x':
          cp = read_hex(2, escape_start);
          break;
        case 'u':
          cp = read_hex(4, escape_start);
          break;
        case 'U':
          cp = read_hex(8, escape_start);
          break;
        default:
          if (e >= '0' && e <= '7') {
            cp = static_cast<char32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < s.size() && s[pos_] >= '0' && s[pos_] <= '7'; ++i) {
              cp = cp * 8 + static_cast<char32_t>(s[pos_++] - '0');
            }
            break;
          }
          flush_surrogate();
          value.push_back('\\');
          pos_ = escape_start + 1;  // the character after the backslash is read as ordinary text
          continue;
      }
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        flush_surrogate();
        pending_high_surrogate = cp;
        continue;
      }
      if (cp >= 0xDC00 && cp <= 0xDFFF) {
        if (pending_high_surrogate != 0) {
          cp = 0x10000 + ((pending_high_surrogate - 0xD800) << 10) + (cp - 0xDC00);
          pending_high_surrogate = 0;
        } else {
          cp = 0xFFFD;
        }
      } else {
        flush_surrogate();
      }
      if (cp > 0x10FFFF)
        fail(std::string("invalid escape sequence ") + s.substr(escape_start, pos_ - escape_start),
             escape_start);
      append_utf8(value, cp);
    }
    flush_surrogate();
    ++pos_;  // closing quote
    push(TokenType::kString, std::move(value), start);
  }

  std::string_view source_;
  MappedText text_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (source.size() >= UINT32_MAX) throw JinjaError("template larger than 4 GiB");
  return Lexer(source, preprocess(source)).run();
}

SourceLocation locate(std::string_view source, size_t offset) {
  SourceLocation location;
  offset = std::min(offset, source.size());
  for (size_t pos = 0; pos < offset;) {
    if (source[pos] == '\n' || source[pos] == '\r') {
      ++location.line;
      location.column = 1;
      pos += source[pos] == '\r' && pos + 1 < source.size() && source[pos + 1] == '\n' ? 2 : 1;
      continue;
    }
    next_code_point(source, pos);
    ++location.column;
  }
  return location;
}

std::string describe_location(std::string_view source, size_t offset) {
  const SourceLocation location = locate(source, offset);
  return "line " + std::to_string(location.line) + ":" + std::to_string(location.column);
}

}  // namespace helium::jinja
