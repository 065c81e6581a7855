// tokenizer/regex.h — the patterns of tokenizer.json (written for Oniguruma, which the reference Rust
// library uses) run on PCRE2 with Oniguruma's meaning.
// Owns: translating Oniguruma syntax to PCRE2, compiling (JIT when available) and iterating matches.
// Must not: know which component a pattern belongs to.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace helium::tokenizer_json {

// Rewrites an Oniguruma (Ruby syntax) pattern into a PCRE2 pattern with the same meaning under
// PCRE2_UTF | PCRE2_UCP:
//   \s \S     -> Unicode White_Space (PCRE2's \s adds U+180E)
//   \w \W     -> Oniguruma's word set: Alphabetic, marks, decimal digits, connector punctuation
//   \h \H     -> hexadecimal digit (PCRE2's \h means horizontal space)
//   \b \B     -> boundaries of that word set
//   \uHHHH    -> \x{HHHH};  {,n} -> {0,n};  (?m) -> (?s)  (Ruby's m is PCRE's dotall)
//   [[:alpha:]] and the other POSIX classes -> their Unicode property sets
// Constructs PCRE2 would silently read differently (nested classes and `&&` intersections, `X{n}+`,
// negated shorthands inside classes) are rejected with an error rather than mistranslated.
Result<std::string> translate_oniguruma_pattern(std::string_view pattern);

// A compiled pattern. Copies share the compiled code, which is immutable, so one Regex may be used from
// several threads at once.
class Regex {
 public:
  // Compiles an Oniguruma pattern (see translate_oniguruma_pattern).
  static Result<Regex> from_oniguruma(std::string_view pattern);
  // Matches `text` literally.
  static Regex literal(std::string_view text);

  // All non-overlapping matches, as [begin, end) byte offsets, in the order of the Rust `onig` crate's
  // find_iter (the reference's iteration): an empty match right after the previous match is skipped by
  // advancing one character. `text` must be valid UTF-8.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  const std::string& source() const { return source_; }

 private:
  struct Compiled;
  std::string source_;
  std::string literal_;  // used when code_ is null
  std::shared_ptr<const Compiled> code_;
};

}  // namespace helium::tokenizer_json
