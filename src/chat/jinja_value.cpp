// chat/jinja_value.cpp — see jinja_value.h.
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja_text.h"

namespace helium::jinja {

namespace {

void check_depth(uint32_t depth) {
  if (depth > kMaxValueDepth) {
    throw JinjaError("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
}

}  // namespace

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::list(std::vector<Value> items) {
  uint32_t depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  check_depth(depth + 1);
  return Value(Storage(std::make_shared<const ListData>(ListData{std::move(items), depth + 1})));
}

Value Value::dict(std::vector<std::pair<std::string, Value>> entries) {
  uint32_t depth = 0;
  for (const auto& entry : entries) depth = std::max(depth, entry.second.depth());
  check_depth(depth + 1);
  return Value(Storage(std::make_shared<const DictData>(DictData{std::move(entries), depth + 1})));
}

uint32_t Value::depth() const {
  switch (kind()) {
    case Kind::kList:
      return std::get<ListPtr>(v_)->depth;
    case Kind::kDict:
      return std::get<DictPtr>(v_)->depth;
    default:
      return 1;
  }
}

const void* Value::payload_identity() const {
  switch (kind()) {
    case Kind::kString:
      return std::get<StringPtr>(v_).get();
    case Kind::kList:
      return std::get<ListPtr>(v_).get();
    case Kind::kDict:
      return std::get<DictPtr>(v_).get();
    case Kind::kNamespace:
      return namespace_ptr().get();
    case Kind::kCallable:
      return callable_ptr().get();
    default:
      return nullptr;
  }
}

namespace {

Value from_json_at_depth(const nlohmann::ordered_json& json, uint32_t depth) {
  using Type = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case Type::null:
      return Value::none();
    case Type::boolean:
      return Value::boolean(json.get<bool>());
    case Type::number_integer:
      return Value::integer(json.get<int64_t>());
    case Type::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case Type::number_float:
      return Value::floating(json.get<double>());
    case Type::string:
      return Value::string(json.get_ref<const std::string&>());
    case Type::array: {
      check_depth(depth + 1);
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at_depth(item, depth + 1));
      return Value::list(std::move(items));
    }
    case Type::object: {
      check_depth(depth + 1);
      std::vector<std::pair<std::string, Value>> entries;
      entries.reserve(json.size());
      for (const auto& [key, item] : json.items())
        entries.emplace_back(key, from_json_at_depth(item, depth + 1));
      return Value::dict(std::move(entries));
    }
    default:
      return Value();  // binary and discarded values have no template meaning
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& json) {
  return from_json_at_depth(json, 0);
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0 && !std::isnan(v.as_float());
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return !v.as_list().empty();
    case Value::Kind::kDict:
      return !v.as_dict().entries.empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
      return true;
  }
  return false;
}

namespace {

bool is_numeric_like(const Value& v) {
  return v.is_int() || v.is_float() || v.is_bool();
}

double numeric_value(const Value& v) {
  return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_number();
}

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
  return numeric_value(a) == numeric_value(b);
}

bool sequences_equal(const Value& a, const Value& b, bool (*equal)(const Value&, const Value&)) {
  const auto& x = a.as_list();
  const auto& y = b.as_list();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!equal(x[i], y[i])) return false;
  }
  return true;
}

bool dicts_equal(const Value& a, const Value& b, bool (*equal)(const Value&, const Value&)) {
  const auto& x = a.as_dict().entries;
  const auto& y = b.as_dict();
  if (x.size() != y.entries.size()) return false;
  for (const auto& [key, value] : x) {
    const Value* other = y.find(key);
    if (other == nullptr || !equal(value, *other)) return false;
  }
  return true;
}

}  // namespace

bool loose_equal(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  // None equals only None and undefined only undefined, as in Python Jinja (JavaScript's null == undefined
  // does not carry over).
  if (a.is_none() || a.is_undefined() || b.is_none() || b.is_undefined()) return a.kind() == b.kind();
  if (is_numeric_like(a) && is_numeric_like(b)) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kString:
      return a.as_string() == b.as_string();
    case Kind::kList:
      return sequences_equal(a, b, loose_equal);
    case Kind::kDict:
      return dicts_equal(a, b, loose_equal);
    default:
      return a.payload_identity() == b.payload_identity();
  }
}

bool strict_equal(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return a.as_bool() == b.as_bool();
    case Kind::kString:
      return a.as_string() == b.as_string();
    case Kind::kList:
      return sequences_equal(a, b, strict_equal);
    case Kind::kDict:
      return dicts_equal(a, b, strict_equal);
    default:
      return a.payload_identity() == b.payload_identity();
  }
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if ((a.is_none() && b.is_none()) || (a.is_undefined() && b.is_undefined())) return 0;
  if (is_numeric_like(a) && is_numeric_like(b)) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = numeric_value(a);
    const double y = numeric_value(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order.
    const int c = case_sensitive ? a.as_string().compare(b.as_string())
                                 : to_lower(a.as_string()).compare(to_lower(b.as_string()));
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  throw JinjaError("cannot compare " + std::string(type_name(a)) + " with " + std::string(type_name(b)));
}

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "undefined";
    case Value::Kind::kNone:
      return "none";
    case Value::Kind::kBool:
      return "boolean";
    case Value::Kind::kInt:
      return "integer";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "string";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "namespace";
    case Value::Kind::kCallable:
      return "callable";
  }
  return "value";
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), f, std::chars_format::scientific);
  std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));  // "-d.ddde+XX"
  std::string out;
  if (text.front() == '-') {
    out.push_back('-');
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  std::string digits(1, text[0]);
  if (e > 1) digits.append(text.substr(2, e - 2));
  int exponent = 0;
  std::from_chars(text.data() + e + (text[e + 1] == '+' ? 2 : 1), text.data() + text.size(), exponent);
  // Python's repr: positional notation while the exponent is in [-4, 16), else scientific.
  if (exponent >= 16 || exponent < -4) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_text;
  } else if (exponent >= 0) {
    const auto integer_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= integer_digits) {
      out += digits;
      out.append(integer_digits - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, integer_digits);
      out.push_back('.');
      out.append(digits, integer_digits);
    }
  } else {
    out += "0.";
    out.append(static_cast<size_t>(-exponent - 1), '0');
    out += digits;
  }
  return out;
}

void append_json(std::string& out, const Value& v, const JsonFormat& format, uint32_t depth) {
  // Namespaces are mutable and may contain themselves; the depth bound turns a cycle into an error.
  if (depth > kMaxValueDepth)
    throw JinjaError("tojson: value nested deeper than " + std::to_string(kMaxValueDepth));
  const bool pretty = format.indent >= 0;
  auto newline = [&](uint32_t level) {
    out.push_back('\n');
    for (uint32_t i = 0; i < level; ++i) out += format.indent_string;
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      out += format.undefined_as_null ? "null" : "undefined";
      return;
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      if (std::isnan(f))
        out += "NaN";
      else if (std::isinf(f))
        out += f > 0 ? "Infinity" : "-Infinity";
      else
        out += float_repr(f);
      return;
    }
    case Value::Kind::kString:
      append_json_string(out, v.as_string(), format.ensure_ascii);
      return;
    case Value::Kind::kList: {
      const auto& items = v.as_list();
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += format.item_separator;
        if (pretty) newline(depth + 1);
        append_json(out, items[i], format, depth + 1);
      }
      if (pretty && !items.empty()) newline(depth);
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const auto& entries = v.entries().entries;
      std::vector<const std::pair<std::string, Value>*> order;
      order.reserve(entries.size());
      for (const auto& entry : entries) order.push_back(&entry);
      if (format.sort_keys) {
        std::stable_sort(order.begin(), order.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out.push_back('{');
      for (size_t i = 0; i < order.size(); ++i) {
        if (i > 0) out += format.item_separator;
        if (pretty) newline(depth + 1);
        append_json_string(out, order[i]->first, format.ensure_ascii);
        out += format.key_separator;
        append_json(out, order[i]->second, format, depth + 1);
      }
      if (pretty && !order.empty()) newline(depth);
      out.push_back('}');
      return;
    }
    case Value::Kind::kCallable:
      throw JinjaError("cannot convert a callable ('" + std::string(v.as_callable().name()) + "') to JSON");
  }
}

namespace {

// Python's repr of a str: single quotes unless the text has a ' and no ", backslash escapes for the
// quote, backslash and control characters (\n \r \t, else \xNN), and \xNN / \uNNNN for the non-printable
// code points a chat template can meet (C1 controls, no-break and soft-hyphen, zero-width marks, line and
// paragraph separators, the byte-order mark); other text as it is. Malformed UTF-8 bytes pass through.
void append_python_str_repr(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  auto hex = [&](char prefix, uint32_t cp, int digits) {
    static const char* kHex = "0123456789abcdef";
    out.push_back('\\');
    out.push_back(prefix);
    for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out.push_back(kHex[(cp >> shift) & 0xf]);
  };
  out.push_back(quote);
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    if (i - start > 1) {  // a multi-byte sequence: escaped when not printable, else its bytes
      if ((cp >= 0x80 && cp <= 0xa0) || cp == 0xad) hex('x', cp, 2);
      else if ((cp >= 0x200b && cp <= 0x200f) || cp == 0x2028 || cp == 0x2029 || cp == 0xfeff) hex('u', cp, 4);
      else out.append(s, start, i - start);
    } else if (cp == '\\') {
      out += "\\\\";
    } else if (cp == static_cast<unsigned char>(quote)) {
      out.push_back('\\');
      out.push_back(quote);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7f) {
      hex('x', cp, 2);
    } else {
      out.push_back(s[start]);  // printable ASCII, or a malformed byte as it is
    }
  }
  out.push_back(quote);
}

// Python's repr of a value inside a list or dict.
void append_python_repr(std::string& out, const Value& v, uint32_t depth) {
  // Namespaces are mutable and may contain themselves; the depth bound turns a cycle into an error.
  if (depth > kMaxValueDepth) throw JinjaError("value nested deeper than " + std::to_string(kMaxValueDepth));
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      out += float_repr(v.as_float());
      return;
    case Value::Kind::kString:
      append_python_str_repr(out, v.as_string());
      return;
    case Value::Kind::kList: {
      const auto& items = v.as_list();
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        append_python_repr(out, items[i], depth + 1);
      }
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const auto& entries = v.entries().entries;
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += ", ";
        append_python_str_repr(out, entries[i].first);
        out += ": ";
        append_python_repr(out, entries[i].second, depth + 1);
      }
      out.push_back('}');
      return;
    }
    case Value::Kind::kCallable:
      throw JinjaError("cannot print a callable ('" + std::string(v.as_callable().name()) + "')");
  }
}

}  // namespace

void append_display(std::string& out, const Value& v) {
  if (v.is_undefined()) return;  // the only value that prints nothing
  if (v.is_string()) {
    out += v.as_string();  // str() of a string is the string itself; everything else prints as its repr
    return;
  }
  append_python_repr(out, v, 0);
}

std::string display_string(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_display(out, v);
  return out;
}

}  // namespace helium::jinja
