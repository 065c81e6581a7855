// tokenizer/unicode.cpp — UTF-8 handling and Unicode properties (see unicode.h).
#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

namespace helium::tokenizer_json::unicode {

namespace {

bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// Scans the UTF-8 sequence at `pos`: returns how many bytes belong to it and sets `complete` when they
// form a well-formed character. An ill-formed sequence is cut at its "maximal subpart": the lead byte
// plus every following byte that still fits some well-formed sequence (the bounds on the second byte are
// those of the Unicode table "Well-Formed UTF-8 Byte Sequences"). A byte that can never start a
// sequence is a subpart of length one.
size_t scan_sequence(std::string_view s, size_t pos, bool& complete) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  complete = b0 < 0x80;
  if (complete) return 1;
  size_t need = 0;
  unsigned char lower = 0x80, upper = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lower = 0xA0;
    if (b0 == 0xED) upper = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lower = 0x90;
    if (b0 == 0xF4) upper = 0x8F;
  } else {
    return 1;
  }
  size_t consumed = 1;
  while (consumed <= need && pos + consumed < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos + consumed]);
    if (b < lower || b > upper) break;
    lower = 0x80;
    upper = 0xBF;
    ++consumed;
  }
  complete = consumed == need + 1;
  return consumed;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
  bool complete = true;
  for (size_t pos = 0; pos < bytes.size();) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    pos += scan_sequence(bytes, pos, complete);
    if (!complete) return false;
  }
  return true;
}

std::string to_valid_utf8(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  bool complete = true;
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t n = scan_sequence(bytes, pos, complete);
    if (complete) {
      out.append(bytes.substr(pos, n));
    } else {
      out.append(kReplacementUtf8);
    }
    pos += n;
  }
  return out;
}

char32_t decode_next(std::string_view text, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  const size_t n = sequence_length(b0);
  char32_t cp;
  switch (n) {
    case 1:
      cp = b0;
      break;
    case 2:
      cp = b0 & 0x1F;
      break;
    case 3:
      cp = b0 & 0x0F;
      break;
    default:
      cp = b0 & 0x07;
      break;
  }
  for (size_t k = 1; k < n && pos + k < text.size(); ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
  }
  pos += n;
  return cp;
}

size_t char_start_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && is_continuation(static_cast<unsigned char>(text[start]))) --start;
  return start;
}

char32_t decode_before(std::string_view text, size_t end) {
  size_t start = char_start_before(text, end);
  return decode_next(text, start);
}

bool is_white_space(char32_t cp) {
  // PropList.txt White_Space; the set has been stable since Unicode 6.3 removed U+180E.
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {
utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}
}  // namespace

bool is_letter(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
}

bool is_mark(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_MN && c <= UTF8PROC_CATEGORY_ME;
}

bool is_numeric(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

std::string normalize(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (char ch : text) {
    if (static_cast<unsigned char>(ch) >= 0x80) {
      ascii = false;
      break;
    }
  }
  // ASCII is invariant under every normalization form; most text takes this path.
  if (ascii) return std::string(text);

  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                          static_cast<utf8proc_option_t>(options));
  // utf8proc only fails on invalid UTF-8 or allocation failure; the callers pass valid UTF-8, so a
  // failure leaves the text as it was rather than losing it.
  if (n < 0) return std::string(text);
  std::string out(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
  std::free(mapped);
  return out;
}

namespace {

// Case_Ignorable (DerivedCoreProperties): Mn, Me, Cf, Lm, Sk, plus the Word_Break classes MidLetter,
// MidNumLet and Single_Quote, listed here because utf8proc does not expose Word_Break.
bool is_case_ignorable(char32_t cp) {
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  static constexpr char32_t kWordBreakMid[] = {0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,
                                               0x5F4,  0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                               0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return std::find(std::begin(kWordBreakMid), std::end(kWordBreakMid), cp) != std::end(kWordBreakMid);
}

// Cased: Lowercase, Uppercase or Lt. utf8proc's islower/isupper cover Ll/Lu and the Other_Lowercase and
// Other_Uppercase letters that have case mappings.
bool is_cased(char32_t cp) {
  const auto c = static_cast<utf8proc_int32_t>(cp);
  return utf8proc_islower(c) || utf8proc_isupper(c) || category(cp) == UTF8PROC_CATEGORY_LT;
}

// Unicode's Final_Sigma condition: a cased letter before (skipping case-ignorables) and none after.
bool is_final_sigma(std::string_view text, size_t sigma_begin, size_t sigma_end) {
  bool cased_before = false;
  for (size_t end = sigma_begin; end > 0;) {
    const char32_t cp = decode_before(text, end);
    end = char_start_before(text, end);
    if (is_case_ignorable(cp)) continue;
    cased_before = is_cased(cp);
    break;
  }
  if (!cased_before) return false;
  for (size_t pos = sigma_end; pos < text.size();) {
    const char32_t cp = decode_next(text, pos);
    if (is_case_ignorable(cp)) continue;
    return !is_cased(cp);
  }
  return true;
}

}  // namespace

std::string to_lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    const char32_t cp = decode_next(text, pos);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    } else if (cp == 0x130) {
      // The one unconditional SpecialCasing lowercase mapping to more than one code point.
      out.append("i\xCC\x87");
    } else if (cp == 0x3A3) {
      append_utf8(out, is_final_sigma(text, begin, pos) ? 0x3C2 : 0x3C3);
    } else {
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
  }
  return out;
}

}  // namespace helium::tokenizer_json::unicode
