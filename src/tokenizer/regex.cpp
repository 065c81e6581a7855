// tokenizer/regex.cpp — Oniguruma patterns on PCRE2 (see regex.h).
#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <cstdint>
#include <initializer_list>

#include "tokenizer/unicode.h"

namespace helium::tokenizer_json {

namespace {

// Oniguruma's word characters (its Unicode "Word" property, plus the Latin-1 digits and fractions its
// ctype table marks as word characters).
constexpr std::string_view kWordSet =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
constexpr std::string_view kWhiteSpace = "\\p{White_Space}";
constexpr std::string_view kNotWhiteSpace = "\\P{White_Space}";
constexpr std::string_view kHexDigits = "0-9A-Fa-f";

Status pattern_error(std::string_view pattern, size_t offset, const std::string& what) {
  return Status::error("regex '" + std::string(pattern) + "' at offset " + std::to_string(offset) + ": " +
                       what);
}

// Strings are appended piece by piece rather than with chains of std::string operator+, which GCC 12
// misreports here as an overlapping memcpy (-Wrestrict).
void append_all(std::string& out, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) out += part;
}

// Appends "[contents]" or "[^contents]".
void append_class(std::string& out, bool negated, std::string_view contents) {
  append_all(out, {negated ? "[^" : "[", contents, "]"});
}

bool is_hex(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Length of an interval quantifier `{n}`, `{n,}`, `{n,m}` or `{,m}` at `pos`, or 0 when the brace is a
// literal (Oniguruma and PCRE2 both read a malformed interval as literal text).
size_t interval_length(std::string_view p, size_t pos) {
  size_t i = pos + 1;
  size_t digits_before = 0;
  while (i < p.size() && is_digit(p[i])) ++i, ++digits_before;
  bool comma = false;
  size_t digits_after = 0;
  if (i < p.size() && p[i] == ',') {
    comma = true;
    ++i;
    while (i < p.size() && is_digit(p[i])) ++i, ++digits_after;
  }
  if (i >= p.size() || p[i] != '}') return 0;
  if (digits_before == 0 && (!comma || digits_after == 0)) return 0;
  return i + 1 - pos;
}

// The Unicode sets of Oniguruma's POSIX bracket classes, as PCRE2 class contents. Classes whose
// Oniguruma definition is not a plain union of properties are left out and rejected.
bool posix_class(std::string_view name, std::string& positive, std::string& negated) {
  negated.clear();
  if (name == "alpha")
    positive = "\\p{Alphabetic}", negated = "\\P{Alphabetic}";
  else if (name == "alnum")
    positive = "\\p{Alphabetic}\\p{Nd}";
  else if (name == "digit")
    positive = "\\p{Nd}", negated = "\\P{Nd}";
  else if (name == "lower")
    positive = "\\p{Lowercase}", negated = "\\P{Lowercase}";
  else if (name == "upper")
    positive = "\\p{Uppercase}", negated = "\\P{Uppercase}";
  else if (name == "space")
    positive = std::string(kWhiteSpace), negated = std::string(kNotWhiteSpace);
  else if (name == "blank")
    positive = "\\t\\p{Zs}";
  else if (name == "cntrl")
    positive = "\\p{Cc}", negated = "\\P{Cc}";
  else if (name == "word")
    positive = std::string(kWordSet);
  else if (name == "xdigit")
    positive = std::string(kHexDigits);
  else
    return false;
  return true;
}

// Translates the escape at p[pos] == '\\'; appends to `out` and returns the position after it.
Result<size_t> translate_escape(std::string_view p, size_t pos, bool in_class, std::string& out) {
  if (pos + 1 >= p.size()) return pattern_error(p, pos, "trailing backslash");
  const char c = p[pos + 1];
  const size_t next = pos + 2;
  switch (c) {
    case 's':
      out += kWhiteSpace;
      return next;
    case 'S':
      out += kNotWhiteSpace;
      return next;
    case 'w':
      if (in_class) {
        out += kWordSet;
      } else {
        append_class(out, false, kWordSet);
      }
      return next;
    case 'W':
      if (in_class) return pattern_error(p, pos, "\\W inside a character class is not supported");
      append_class(out, true, kWordSet);
      return next;
    case 'h':
      if (in_class) {
        out += kHexDigits;
      } else {
        append_class(out, false, kHexDigits);
      }
      return next;
    case 'H':
      if (in_class) return pattern_error(p, pos, "\\H inside a character class is not supported");
      append_class(out, true, kHexDigits);
      return next;
    case 'b':
    case 'B': {
      if (in_class) {  // backspace in both dialects
        out += "\\x{08}";
        return next;
      }
      // \b: a word character on exactly one side; \B: on both or neither.
      std::string w;
      append_class(w, false, kWordSet);
      if (c == 'b') {
        append_all(out, {"(?:(?<!", w, ")(?=", w, ")|(?<=", w, ")(?!", w, "))"});
      } else {
        append_all(out, {"(?:(?<!", w, ")(?!", w, ")|(?<=", w, ")(?=", w, "))"});
      }
      return next;
    }
    case 'v':
      out += "\\x{0B}";
      return next;  // PCRE2's \v is a class of vertical spaces
    case 'u': {
      if (pos + 6 > p.size() || !is_hex(p[pos + 2]) || !is_hex(p[pos + 3]) || !is_hex(p[pos + 4]) ||
          !is_hex(p[pos + 5])) {
        return pattern_error(p, pos, "\\u must be followed by four hexadecimal digits");
      }
      out += "\\x{" + std::string(p.substr(pos + 2, 4)) + "}";
      return pos + 6;
    }
    case 'p':
    case 'P':
    case 'x':
    case 'k':
    case 'g': {
      // Braced forms (\p{L}, \x{263A}, \k<name>...) are copied whole so that their contents are not
      // read as pattern syntax.
      out.push_back('\\');
      out.push_back(c);
      size_t i = next;
      if (i < p.size() && (p[i] == '{' || p[i] == '<' || p[i] == '\'')) {
        const char close = p[i] == '{' ? '}' : (p[i] == '<' ? '>' : '\'');
        const size_t end = p.find(close, i + 1);
        if (end == std::string_view::npos) return pattern_error(p, pos, "unterminated escape");
        out.append(p.substr(i, end + 1 - i));
        return end + 1;
      }
      return i;
    }
    default: {
      // Everything else (\n, \t, \d, \A, \z, digits, escaped punctuation...) means the same in both
      // dialects. A multi-byte character after the backslash is copied whole.
      size_t end = next;
      while (end < p.size() && (static_cast<unsigned char>(p[end]) & 0xC0) == 0x80) ++end;
      out.append(p.substr(pos, end - pos));
      return end;
    }
  }
}

}  // namespace

Result<std::string> translate_oniguruma_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 2);
  bool in_class = false;
  size_t class_content_start = 0;  // first position after "[" or "[^"
  bool after_interval = false;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    const bool was_interval = after_interval;
    after_interval = false;
    if (c == '\\') {
      HELIUM_ASSIGN_OR_RETURN(i, translate_escape(p, i, in_class, out));
      continue;
    }
    if (in_class) {
      if (c == '[') {
        if (i + 1 < p.size() && p[i + 1] == ':') {
          const size_t end = p.find(":]", i + 2);
          if (end == std::string_view::npos) return pattern_error(p, i, "unterminated POSIX class");
          std::string_view name = p.substr(i + 2, end - i - 2);
          const bool negate = !name.empty() && name[0] == '^';
          if (negate) name.remove_prefix(1);
          std::string positive, negated;
          if (!posix_class(name, positive, negated) || (negate && negated.empty())) {
            return pattern_error(p, i,
                                 "POSIX class [:" + std::string(negate ? "^" : "") + std::string(name) +
                                     ":] is not supported");
          }
          out += negate ? negated : positive;
          i = end + 2;
          continue;
        }
        return pattern_error(p, i, "nested character classes (Oniguruma set operations) are not supported");
      }
      if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
        return pattern_error(p, i, "character class intersection '&&' is not supported");
      }
      if (c == ']' && i > class_content_start) in_class = false;
      out.push_back(c);
      ++i;
      continue;
    }
    switch (c) {
      case '[':
        in_class = true;
        out.push_back('[');
        ++i;
        if (i < p.size() && p[i] == '^') out.push_back(p[i++]);
        class_content_start = i;
        continue;
      case '{': {
        const size_t n = interval_length(p, i);
        if (n == 0) {
          out += "\\{";
          ++i;
          continue;
        }
        if (p[i + 1] == ',')
          out += "{0";
        else
          out.push_back('{');
        out.append(p.substr(i + 1, n - 1));
        i += n;
        after_interval = true;
        continue;
      }
      case '+':
        // Oniguruma (Ruby syntax) reads "X{2}+" as a repetition of "X{2}", PCRE2 as a possessive
        // interval; no tokenizer is known to use it, so it is refused rather than emulated.
        if (was_interval) return pattern_error(p, i, "'+' after an interval quantifier is not supported");
        out.push_back(c);
        ++i;
        continue;
      case '(': {
        // Inline options: Ruby's (?m) is PCRE2's (?s); i and x mean the same.
        if (i + 2 < p.size() && p[i + 1] == '?') {
          size_t j = i + 2;
          while (j < p.size() && (p[j] == 'i' || p[j] == 'm' || p[j] == 'x' || p[j] == '-')) ++j;
          if (j > i + 2 && j < p.size() && (p[j] == ':' || p[j] == ')')) {
            out += "(?";
            for (size_t k = i + 2; k < j; ++k) out.push_back(p[k] == 'm' ? 's' : p[k]);
            i = j;
            continue;
          }
        }
        out.push_back(c);
        ++i;
        continue;
      }
      default:
        out.push_back(c);
        ++i;
        continue;
    }
  }
  if (in_class) return pattern_error(p, p.size(), "unterminated character class");
  return out;
}

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  // Match limits, raised far above PCRE2's defaults: encode() has no way to report a match that gave up,
  // so the limits must not be reachable by text the tokenizer patterns can meet (they backtrack at most
  // over one run of similar characters). Read-only after creation, so shared by all threads.
  pcre2_match_context* limits = nullptr;
  ~Compiled() {
    pcre2_match_context_free(limits);
    pcre2_code_free(code);
  }
};

// Ruby syntax, which Oniguruma follows, makes ^ and $ line anchors everywhere (PCRE2's multiline mode),
// and ^ also matches after a newline that ends the text (PCRE2's "alternative circumflex").
constexpr uint32_t kCompileOptions = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX;

Result<Regex> Regex::from_oniguruma(std::string_view pattern) {
  HELIUM_ASSIGN_OR_RETURN(std::string translated, translate_oniguruma_pattern(pattern));
  pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
  // Oniguruma's `.` and `$` know only "\n" as a line end.
  pcre2_set_newline(context, PCRE2_NEWLINE_LF);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   kCompileOptions, &error_code, &error_offset, context);
  pcre2_compile_context_free(context);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return Status::error("regex '" + std::string(pattern) + "': PCRE2 cannot compile it (as '" + translated +
                         "'): " + reinterpret_cast<const char*>(message));
  }
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  // Without JIT support (or memory for it) pcre2_match interprets the same pattern, more slowly.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  compiled->limits = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(compiled->limits, UINT32_MAX);
  pcre2_set_depth_limit(compiled->limits, UINT32_MAX);
  pcre2_set_heap_limit(compiled->limits, 1u << 20);  // KiB: 1 GiB
  Regex regex;
  regex.source_ = std::string(pattern);
  regex.code_ = std::move(compiled);
  return regex;
}

Regex Regex::literal(std::string_view text) {
  Regex regex;
  regex.source_ = std::string(text);
  regex.literal_ = std::string(text);
  return regex;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  if (code_ == nullptr) {
    if (literal_.empty()) return matches;
    for (size_t pos = text.find(literal_); pos != std::string_view::npos;
         pos = text.find(literal_, pos + literal_.size())) {
      matches.emplace_back(pos, pos + literal_.size());
    }
    return matches;
  }

  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  bool have_previous = false;
  size_t previous_end = 0;
  while (search_from <= text.size()) {
    // The text was made valid UTF-8 at the tokenizer's border; skipping PCRE2's check keeps the loop
    // linear instead of re-validating the whole subject at every match.
    int rc =
        pcre2_match(code_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, data, code_->limits);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The JIT's fixed stack can run out on very long inputs; the interpreter keeps its backtracking
      // state on the heap instead.
      rc = pcre2_match(code_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       data, code_->limits);
    }
    // No match: done. Any other failure would mean PCRE2 ran out of memory; the rest of the text then
    // stays unmatched.
    if (rc < 0) break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (begin == end && have_previous && previous_end == end) {
      if (search_from >= text.size()) break;
      search_from += unicode::sequence_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    matches.emplace_back(begin, end);
    have_previous = true;
    previous_end = end;
    search_from = end;
  }
  pcre2_match_data_free(data);
  return matches;
}

}  // namespace helium::tokenizer_json
