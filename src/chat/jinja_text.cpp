// chat/jinja_text.cpp — see jinja_text.h.
#include "chat/jinja_text.h"

#include <utf8proc.h>

namespace helium::jinja {

size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

char32_t next_code_point(std::string_view text, size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t length = utf8_sequence_length(lead);
  if (length == 1 || pos + length > text.size()) {
    ++pos;
    return lead;
  }
  char32_t cp = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    if ((byte & 0xC0) != 0x80) {
      ++pos;
      return lead;
    }
    cp = (cp << 6) | (byte & 0x3F);
  }
  pos += length;
  return cp;
}

size_t code_point_count(std::string_view text) {
  size_t count = 0;
  for (size_t pos = 0; pos < text.size(); ++count) next_code_point(text, pos);
  return count;
}

bool is_js_whitespace(char32_t cp) {
  switch (cp) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x00A0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t js_whitespace_prefix(std::string_view text, size_t pos) {
  const size_t start = pos;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_js_whitespace(next_code_point(text, next))) break;
    pos = next;
  }
  return pos - start;
}

size_t js_whitespace_suffix(std::string_view text, size_t end) {
  size_t pos = end;
  while (pos > 0) {
    // Step back to the start of the previous sequence (at most 3 continuation bytes).
    size_t start = pos - 1;
    while (start > 0 && pos - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t next = start;
    const char32_t cp = next_code_point(text, next);
    if (next != pos || !is_js_whitespace(cp)) break;
    pos = start;
  }
  return end - pos;
}

std::string_view js_trim_start(std::string_view text) {
  return text.substr(js_whitespace_prefix(text));
}

std::string_view js_trim_end(std::string_view text) {
  return text.substr(0, text.size() - js_whitespace_suffix(text, text.size()));
}

std::string_view js_trim(std::string_view text) {
  return js_trim_end(js_trim_start(text));
}

std::string_view strip_chars(std::string_view text, std::string_view chars, bool left, bool right) {
  auto in_set = [&](char32_t cp) {
    for (size_t pos = 0; pos < chars.size();) {
      if (next_code_point(chars, pos) == cp) return true;
    }
    return false;
  };
  size_t begin = 0;
  size_t end = text.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!in_set(next_code_point(text, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
        --start;
      }
      size_t next = start;
      const char32_t cp = next_code_point(text, next);
      if (next != end || !in_set(cp)) break;
      end = start;
    }
  }
  return text.substr(begin, end - begin);
}

namespace {

template <class Map>
std::string map_case(std::string_view text, Map map) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const char32_t cp = next_code_point(text, pos);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(map(cp)));
    } else if (pos - start == 1) {
      out.push_back(text[start]);  // an invalid byte stays as it is
    } else {
      append_utf8(out, static_cast<char32_t>(map(cp)));
    }
  }
  return out;
}

}  // namespace

std::string to_upper(std::string_view text) {
  return map_case(text, [](char32_t cp) { return utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)); });
}

std::string to_lower(std::string_view text) {
  return map_case(text, [](char32_t cp) { return utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)); });
}

void append_json_string(std::string& out, std::string_view text, bool ensure_ascii) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto append_u16 = [&](unsigned unit) {
    out += "\\u";
    out.push_back(kHex[(unit >> 12) & 15]);
    out.push_back(kHex[(unit >> 8) & 15]);
    out.push_back(kHex[(unit >> 4) & 15]);
    out.push_back(kHex[unit & 15]);
  };
  out.push_back('"');
  size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte >= 0x20 && byte < 0x7F && byte != '"' && byte != '\\') {
      // Copy the run of plain ASCII in one go.
      size_t end = pos + 1;
      while (end < text.size()) {
        const auto b = static_cast<unsigned char>(text[end]);
        if (b < 0x20 || b >= 0x7F || b == '"' || b == '\\') break;
        ++end;
      }
      out.append(text, pos, end - pos);
      pos = end;
      continue;
    }
    switch (byte) {
      case '"':
        out += "\\\"";
        ++pos;
        continue;
      case '\\':
        out += "\\\\";
        ++pos;
        continue;
      case '\b':
        out += "\\b";
        ++pos;
        continue;
      case '\f':
        out += "\\f";
        ++pos;
        continue;
      case '\n':
        out += "\\n";
        ++pos;
        continue;
      case '\r':
        out += "\\r";
        ++pos;
        continue;
      case '\t':
        out += "\\t";
        ++pos;
        continue;
      default:
        break;
    }
    if (byte < 0x20) {
      append_u16(byte);
      ++pos;
      continue;
    }
    const size_t start = pos;
    const char32_t cp = next_code_point(text, pos);
    if (!ensure_ascii) {
      out.append(text, start, pos - start);
    } else if (cp >= 0x10000) {
      append_u16(0xD800 + ((cp - 0x10000) >> 10));
      append_u16(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      append_u16(cp);  // includes 0x7F, which both references escape too
    }
  }
  out.push_back('"');
}

}  // namespace helium::jinja
