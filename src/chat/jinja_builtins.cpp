// chat/jinja_builtins.cpp — see jinja_builtins.h.
#include "chat/jinja_builtins.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iterator>

#include "chat/jinja_text.h"

namespace helium::jinja {

namespace {

// ---------------------------------------------------------------------------------------------------
// Callables defined here.

class GlobalFunction final : public Callable {
 public:
  enum class Which : uint8_t { kRange, kNamespace, kRaiseException, kStrftimeNow };
  GlobalFunction(Which w, std::string_view n) : which(w), name_(n) {}
  std::string_view name() const override { return name_; }
  Which which;

 private:
  std::string_view name_;
};

class BoundMethod final : public Callable {
 public:
  BoundMethod(Value r, std::string m) : receiver(std::move(r)), method(std::move(m)) {}
  std::string_view name() const override { return method; }
  Value receiver;
  std::string method;
};

// ---------------------------------------------------------------------------------------------------
// Argument binding for builtins: positional arguments in declaration order, or keywords by name.

class ArgReader {
 public:
  ArgReader(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> names)
      : function_(function), args_(args), names_(names) {
    if (args.positional.size() > names_.size()) {
      fail(std::string(function) + "() takes at most " + std::to_string(names_.size()) + " argument(s), " +
           std::to_string(args.positional.size()) + " given");
    }
    for (const auto& [key, value] : args.keyword) {
      const auto it = std::find(names_.begin(), names_.end(), key);
      if (it == names_.end())
        fail(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
      if (static_cast<size_t>(it - names_.begin()) < args.positional.size()) {
        fail(std::string(function) + "() got multiple values for argument '" + key + "'");
      }
    }
  }

  // The argument at declaration index `i`, or null when not given.
  const Value* get(size_t i) const {
    if (i < args_.positional.size()) return &args_.positional[i];
    for (const auto& [key, value] : args_.keyword) {
      if (key == names_[i]) return &value;
    }
    return nullptr;
  }
  bool get_bool(size_t i, bool fallback) const {
    const Value* v = get(i);
    if (v == nullptr || v->is_none()) return fallback;
    if (!v->is_bool() && !v->is_int()) fail(std::string(names_[i]) + " must be a boolean");
    return truthy(*v);
  }
  int64_t get_int(size_t i, int64_t fallback) const {
    const Value* v = get(i);
    if (v == nullptr || v->is_none()) return fallback;
    if (!v->is_int()) fail(std::string(names_[i]) + " must be an integer, got " + std::string(type_name(*v)));
    return v->as_int();
  }
  // A string argument (nullopt when not given or none).
  std::optional<std::string> get_string(size_t i) const {
    const Value* v = get(i);
    if (v == nullptr || v->is_none()) return std::nullopt;
    if (!v->is_string())
      fail(std::string(names_[i]) + " must be a string, got " + std::string(type_name(*v)));
    return v->as_string();
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw JinjaError(std::string(function_) + ": " + message);
  }

 private:
  std::string_view function_;
  const CallArgs& args_;
  std::vector<std::string_view> names_;
};

[[noreturn]] void fail_type(std::string_view what, const Value& v) {
  throw JinjaError("'" + std::string(what) + "' cannot be applied to a " + std::string(type_name(v)));
}

Value make_list(std::vector<Value> items, RenderContext& context) {
  context.charge(static_cast<int64_t>(items.size()));
  return Value::list(std::move(items));
}

Value make_pair(std::string key, Value value) {
  std::vector<Value> pair;
  pair.reserve(2);
  pair.push_back(Value::string(std::move(key)));
  pair.push_back(std::move(value));
  return Value::list(std::move(pair));
}

// The items a filter iterates over: a list's items, a string's characters, a dict's keys, nothing for
// undefined (Python iterates Undefined as empty).
std::vector<Value> iterate(std::string_view filter, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        next_code_point(s, pos);
        chars.push_back(Value::string(s.substr(start, pos - start)));
      }
      return chars;
    }
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& entry : v.as_dict().entries) keys.push_back(Value::string(entry.first));
      return keys;
    }
    default:
      fail_type(filter, v);
  }
}

// Attribute paths as filters take them ("a.b", "items.0").
Value get_attribute_path(const Value& item, std::string_view path) {
  Value current = item;
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    int64_t index = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    if (current.is_list() && ec == std::errc() && end == part.data() + part.size()) {
      current = get_item(current, Value::integer(index));
    } else {
      current = get_attribute(current, part);
    }
    if (dot == std::string_view::npos) return current;
    path.remove_prefix(dot + 1);
  }
}

Value attribute_of(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return get_item(item, attribute);
  if (!attribute.is_string()) throw JinjaError("attribute must be a string or an integer");
  return get_attribute_path(item, attribute.as_string());
}

std::string_view require_string(std::string_view what, const Value& v) {
  if (!v.is_string()) fail_type(what, v);
  return v.as_string();
}

// Strings for the string filters: strings as they are, undefined as "" (Python's str(Undefined)).
std::string_view string_operand(std::string_view filter, const Value& v) {
  if (v.is_undefined()) return {};
  return require_string(filter, v);
}

// ---------------------------------------------------------------------------------------------------
// String operations shared by filters and methods.

// Title case as the reference does it: an ASCII letter that follows a non-word character (or starts the
// string) is upper-cased; nothing is lower-cased.
std::string title_case(std::string_view s) {
  std::string out(s);
  bool previous_is_word = false;
  for (size_t pos = 0; pos < out.size();) {
    const size_t start = pos;
    const char32_t cp = next_code_point(out, pos);
    const bool word = is_ascii_word(cp);
    if (word && !previous_is_word && cp >= 'a' && cp <= 'z') out[start] = static_cast<char>(cp - 'a' + 'A');
    previous_is_word = word;
  }
  return out;
}

// The reference's capitalize: the first character upper-cased, the rest unchanged.
std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t pos = 0;
  next_code_point(s, pos);
  return to_upper(s.substr(0, pos)) + std::string(s.substr(pos));
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to, int64_t count,
                        RenderContext& context) {
  if (count == 0) return std::string(s);
  const auto limit = count < 0 ? UINT64_MAX : static_cast<uint64_t>(count);
  std::string out;
  uint64_t done = 0;
  if (from.empty()) {
    // Python and the reference insert `to` before every character and at the end.
    const size_t points = code_point_count(s);
    context.check_string_size(s.size() + to.size() * std::min<uint64_t>(limit, points + 1));
    for (size_t pos = 0; pos < s.size();) {
      if (done < limit) {
        out += to;
        ++done;
      }
      const size_t start = pos;
      next_code_point(s, pos);
      out.append(s, start, pos - start);
    }
    if (done < limit) out += to;
    return out;
  }
  size_t pos = 0;
  while (done < limit) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    context.check_string_size(out.size());
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos);
  return out;
}

std::vector<Value> split_string(std::string_view s, const Value* separator, int64_t max_split,
                                bool from_right) {
  std::vector<std::string_view> parts;
  if (separator == nullptr || separator->is_none()) {
    // Runs of whitespace separate and leading/trailing whitespace yields no empty parts; with maxsplit,
    // the remainder keeps its whitespace on the far side (Python's str.split / str.rsplit).
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) of each non-whitespace run
    for (size_t pos = js_whitespace_prefix(s); pos < s.size();) {
      size_t end = pos;
      while (end < s.size()) {
        size_t next = end;
        if (is_js_whitespace(next_code_point(s, next))) break;
        end = next;
      }
      words.emplace_back(pos, end);
      pos = end + js_whitespace_prefix(s, end);
    }
    const size_t n = words.size();
    const bool limited = max_split >= 0 && static_cast<size_t>(max_split) < n;
    if (!limited) {
      for (const auto& [begin, end] : words) parts.push_back(s.substr(begin, end - begin));
    } else if (!from_right) {
      for (size_t i = 0; i < static_cast<size_t>(max_split); ++i) {
        parts.push_back(s.substr(words[i].first, words[i].second - words[i].first));
      }
      parts.push_back(s.substr(words[static_cast<size_t>(max_split)].first));
    } else {
      const size_t kept = n - static_cast<size_t>(max_split);
      parts.push_back(s.substr(0, words[kept - 1].second));
      for (size_t i = kept; i < n; ++i)
        parts.push_back(s.substr(words[i].first, words[i].second - words[i].first));
    }
  } else {
    const std::string_view sep = require_string("split separator", *separator);
    if (sep.empty()) throw JinjaError("split: empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (true) {
        const size_t hit = (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split)
                               ? std::string_view::npos
                               : s.find(sep, pos);
        if (hit == std::string_view::npos) {
          parts.push_back(s.substr(pos));
          break;
        }
        parts.push_back(s.substr(pos, hit - pos));
        pos = hit + sep.size();
      }
    } else {
      size_t end = s.size();
      while (true) {
        const size_t hit =
            (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split) || end < sep.size()
                ? std::string_view::npos
                : s.rfind(sep, end - sep.size());
        if (hit == std::string_view::npos) {
          parts.push_back(s.substr(0, end));
          break;
        }
        parts.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
        end = hit;
      }
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  out.reserve(parts.size());
  for (std::string_view part : parts) out.push_back(Value::string(part));
  return out;
}

// startswith / endswith with a string or a tuple/list of strings.
bool affix_matches(std::string_view method, std::string_view s, const Value& affix, bool prefix) {
  auto matches = [&](const Value& v) {
    const std::string_view a = require_string(method, v);
    return prefix ? s.substr(0, a.size()) == a : (s.size() >= a.size() && s.substr(s.size() - a.size()) == a);
  };
  if (affix.is_list()) {
    return std::any_of(affix.as_list().begin(), affix.as_list().end(), matches);
  }
  return matches(affix);
}

// Code point index of a byte offset (for find/rfind results).
int64_t code_point_index(std::string_view s, size_t byte_offset) {
  return static_cast<int64_t>(code_point_count(s.substr(0, byte_offset)));
}

// ---------------------------------------------------------------------------------------------------
// Numbers.

// Python's int(str): optional whitespace and sign, digits (underscores between digits allowed).
std::optional<int64_t> parse_python_int(std::string_view text) {
  text = js_trim(text);
  std::string digits;
  bool negative = false;
  size_t pos = 0;
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) negative = text[pos++] == '-';
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c >= '0' && c <= '9') {
      digits.push_back(c);
    } else if (c == '_' && !digits.empty() && pos + 1 < text.size() && text[pos + 1] >= '0' &&
               text[pos + 1] <= '9') {
      continue;
    } else {
      return std::nullopt;
    }
  }
  if (digits.empty()) return std::nullopt;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return negative ? -value : value;
}

std::optional<double> parse_python_float(std::string_view text) {
  text = js_trim(text);
  if (text.empty()) return std::nullopt;
  std::string copy(text);
  for (char& c : copy) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (copy == "inf" || copy == "+inf" || copy == "infinity" || copy == "+infinity") return HUGE_VAL;
  if (copy == "-inf" || copy == "-infinity") return -HUGE_VAL;
  if (copy == "nan" || copy == "+nan" || copy == "-nan") return NAN;
  const char* begin = copy.data();
  if (*begin == '+') ++begin;
  double value = 0;
  const auto [end, ec] = std::from_chars(begin, copy.data() + copy.size(), value);
  if (ec != std::errc() || end != copy.data() + copy.size()) return std::nullopt;
  return value;
}

Value round_value(const Value& v, int64_t precision, std::string_view method) {
  if (!v.is_number() && !v.is_bool()) fail_type("round", v);
  if (method == "common") {
    if (!v.is_float()) return v.is_bool() ? Value::integer(v.as_bool() ? 1 : 0) : v;
    const double x = v.as_float();
    if (!std::isfinite(x)) return v;
    if (precision == 0) return Value::floating(std::nearbyint(x));  // ties to even, like Python's round
    // Python rounds the exact binary value to `precision` decimals; printf does the same.
    char buffer[400];
    std::snprintf(buffer, sizeof(buffer), "%.*f", static_cast<int>(std::clamp<int64_t>(precision, -300, 300)),
                  x);
    return Value::floating(std::strtod(buffer, nullptr));
  }
  if (method != "ceil" && method != "floor")
    throw JinjaError("round: method must be 'common', 'ceil' or 'floor'");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_number() * scale;
  return Value::floating((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// ---------------------------------------------------------------------------------------------------
// Filters.

Value tojson_filter(const Value& operand, const CallArgs& args) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  const ArgReader reader("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonFormat format;
  format.ensure_ascii = reader.get_bool(0, false);
  if (const Value* indent = reader.get(1); indent != nullptr && !indent->is_none()) {
    if (indent->is_int()) {
      format.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
      format.indent_string.assign(static_cast<size_t>(format.indent), ' ');
    } else if (indent->is_string()) {
      format.indent = 0;
      format.indent_string = indent->as_string();
    } else {
      reader.fail("indent must be an integer or a string");
    }
    format.item_separator = ",";
  }
  if (const Value* separators = reader.get(2); separators != nullptr && !separators->is_none()) {
    if (!separators->is_list() || separators->as_list().size() != 2 ||
        !separators->as_list()[0].is_string() || !separators->as_list()[1].is_string()) {
      reader.fail("separators must be a pair of strings");
    }
    format.item_separator = separators->as_list()[0].as_string();
    format.key_separator = separators->as_list()[1].as_string();
  }
  format.sort_keys = reader.get_bool(3, false);
  std::string out;
  append_json(out, operand, format);
  return Value::string(std::move(out));
}

Value indent_filter(const Value& operand, const CallArgs& args, RenderContext& context) {
  const ArgReader reader("indent", args, {"width", "first", "blank"});
  std::string indentation(4, ' ');
  if (const Value* width = reader.get(0); width != nullptr) {
    if (width->is_int()) {
      const int64_t n = std::clamp<int64_t>(width->as_int(), 0, 1 << 16);
      indentation.assign(static_cast<size_t>(n), ' ');
    } else if (width->is_string()) {
      indentation = width->as_string();
    } else {
      reader.fail("width must be an integer or a string");
    }
  }
  const bool first = reader.get_bool(1, false);
  const bool blank = reader.get_bool(2, false);
  const std::string_view s = string_operand("indent", operand);
  std::string out;
  size_t line_start = 0;
  for (size_t line = 0;; ++line) {
    const size_t end = s.find('\n', line_start);
    const std::string_view text =
        s.substr(line_start, end == std::string_view::npos ? end : end - line_start);
    // The reference's rule: the first line only with first=true, empty lines only with blank=true.
    if (!((line == 0 && !first) || (text.empty() && !blank))) out += indentation;
    out += text;
    context.check_string_size(out.size());
    if (end == std::string_view::npos) break;
    out.push_back('\n');
    line_start = end + 1;
  }
  return context.make_string(std::move(out));
}

Value join_filter(const Value& operand, const CallArgs& args, RenderContext& context) {
  const ArgReader reader("join", args, {"d", "attribute"});
  const Value* separator_value = reader.get(0);
  const std::string separator = separator_value == nullptr ? std::string() : display_string(*separator_value);
  const Value* attribute = reader.get(1);
  std::string out;
  bool first = true;
  for (const Value& item : iterate("join", operand)) {
    if (!first) out += separator;
    first = false;
    append_display(out, attribute != nullptr ? attribute_of(item, *attribute) : item);
    context.check_string_size(out.size());
  }
  return context.make_string(std::move(out));
}

Value sort_filter(const Value& operand, const CallArgs& args, RenderContext& context) {
  const ArgReader reader("sort", args, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = reader.get_bool(0, false);
  const bool case_sensitive = reader.get_bool(1, false);
  const Value* attribute = reader.get(2);
  std::vector<Value> items = iterate("sort", operand);
  context.charge(static_cast<int64_t>(items.size()));
  auto key = [&](const Value& item) {
    return attribute == nullptr || attribute->is_none() ? item : attribute_of(item, *attribute);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(key(a), key(b), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::list(std::move(items));
}

Value dictsort(const Value& operand, const CallArgs& args, RenderContext& context) {
  if (!operand.is_dict()) fail_type("dictsort", operand);
  const ArgReader reader("dictsort", args, {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = reader.get_bool(0, false);
  const std::string by = reader.get_string(1).value_or("key");
  if (by != "key" && by != "value") reader.fail("by must be 'key' or 'value'");
  const bool reverse = reader.get_bool(2, false);
  std::vector<Value> pairs;
  for (const auto& [key, value] : operand.as_dict().entries) pairs.push_back(make_pair(key, value));
  const size_t index = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(a.as_list()[index], b.as_list()[index], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return make_list(std::move(pairs), context);
}

Value unique_filter(const Value& operand, const CallArgs& args, RenderContext& context) {
  // The reference compares with === (so case-sensitively); case_sensitive=false asks for Python's folding.
  const ArgReader reader("unique", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = reader.get_bool(0, true);
  const Value* attribute = reader.get(1);
  std::vector<Value> out;
  std::vector<Value> seen;
  for (const Value& item : iterate("unique", operand)) {
    Value key = attribute == nullptr || attribute->is_none() ? item : attribute_of(item, *attribute);
    if (!case_sensitive && key.is_string()) key = Value::string(to_lower(key.as_string()));
    context.charge(static_cast<int64_t>(seen.size()));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return strict_equal(s, key); })) {
      seen.push_back(std::move(key));
      out.push_back(item);
    }
  }
  return make_list(std::move(out), context);
}

// select / reject (test on the item) and selectattr / rejectattr (test on an attribute of the item).
Value select_filter(std::string_view name, const Value& operand, const CallArgs& args, bool on_attribute,
                    bool keep, RenderContext& context) {
  if (!args.keyword.empty()) throw JinjaError(std::string(name) + "() takes no keyword arguments");
  size_t next = 0;
  Value attribute;
  if (on_attribute) {
    if (args.positional.empty()) throw JinjaError(std::string(name) + "() needs an attribute name");
    attribute = args.positional[next++];
  }
  std::optional<Test> test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    const Value& test_name = args.positional[next++];
    if (!test_name.is_string()) throw JinjaError(std::string(name) + "(): the test name must be a string");
    test = find_test(test_name.as_string());
    if (!test) throw JinjaError(std::string(name) + "(): unknown test '" + test_name.as_string() + "'");
    test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(next),
                                args.positional.end());
  }
  std::vector<Value> out;
  for (const Value& item : iterate(name, operand)) {
    const Value subject = on_attribute ? attribute_of(item, attribute) : item;
    const bool passed = test ? apply_test(*test, subject, test_args) : truthy(subject);
    if (passed == keep) out.push_back(item);
  }
  return make_list(std::move(out), context);
}

Value map_filter(const Value& operand, const CallArgs& args, RenderContext& context) {
  std::vector<Value> out;
  if (args.positional.empty()) {
    const ArgReader reader("map", args, {"attribute", "default"});
    const Value* attribute = reader.get(0);
    if (attribute == nullptr) throw JinjaError("map() needs a filter name or attribute=");
    const Value* fallback = reader.get(1);
    for (const Value& item : iterate("map", operand)) {
      Value v = attribute_of(item, *attribute);
      out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : std::move(v));
    }
    return make_list(std::move(out), context);
  }
  // map('filter', args...): applies another filter to every item.
  const Value& filter_name = args.positional[0];
  if (!filter_name.is_string()) throw JinjaError("map(): the filter name must be a string");
  const std::optional<Filter> filter = find_filter(filter_name.as_string());
  if (!filter) throw JinjaError("map(): unknown filter '" + filter_name.as_string() + "'");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : iterate("map", operand)) {
    out.push_back(apply_filter(*filter, filter_name.as_string(), item, rest, context));
  }
  return make_list(std::move(out), context);
}

Value batch_filter(const Value& operand, const CallArgs& args, RenderContext& context) {
  const ArgReader reader("batch", args, {"linecount", "fill_with"});
  const int64_t size = reader.get_int(0, 0);
  if (size < 1) reader.fail("linecount must be at least 1");
  const Value* fill = reader.get(1);
  std::vector<Value> batches;
  std::vector<Value> current;
  for (const Value& item : iterate("batch", operand)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) {
      batches.push_back(Value::list(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (fill != nullptr && !fill->is_none()) {
      while (static_cast<int64_t>(current.size()) < size) current.push_back(*fill);
    }
    batches.push_back(Value::list(std::move(current)));
  }
  return make_list(std::move(batches), context);
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return Value::integer(static_cast<int64_t>(code_point_count(v.as_string())));
    case Value::Kind::kList:
      return Value::integer(static_cast<int64_t>(v.as_list().size()));
    case Value::Kind::kDict:
      return Value::integer(static_cast<int64_t>(v.as_dict().entries.size()));
    case Value::Kind::kUndefined:
      return Value::integer(0);
    default:
      fail_type("length", v);
  }
}

Value no_argument_filter(std::string_view name, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty())
    throw JinjaError(std::string(name) + "() takes no arguments");
  return Value();
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Name tables.

std::optional<Filter> find_filter(std::string_view name) {
  static constexpr std::pair<std::string_view, Filter> kFilters[] = {
      {"abs", Filter::kAbs},         {"batch", Filter::kBatch},
      {"bool", Filter::kBool},       {"capitalize", Filter::kCapitalize},
      {"count", Filter::kLength},    {"d", Filter::kDefault},
      {"default", Filter::kDefault}, {"dictsort", Filter::kDictsort},
      {"e", Filter::kEscape},        {"escape", Filter::kEscape},
      {"first", Filter::kFirst},     {"float", Filter::kFloat},
      {"indent", Filter::kIndent},   {"int", Filter::kInt},
      {"items", Filter::kItems},     {"join", Filter::kJoin},
      {"keys", Filter::kKeys},       {"last", Filter::kLast},
      {"length", Filter::kLength},   {"list", Filter::kList},
      {"lower", Filter::kLower},     {"map", Filter::kMap},
      {"reject", Filter::kReject},   {"rejectattr", Filter::kRejectattr},
      {"replace", Filter::kReplace}, {"reverse", Filter::kReverse},
      {"round", Filter::kRound},     {"safe", Filter::kSafe},
      {"select", Filter::kSelect},   {"selectattr", Filter::kSelectattr},
      {"sort", Filter::kSort},       {"string", Filter::kString},
      {"title", Filter::kTitle},     {"tojson", Filter::kTojson},
      {"trim", Filter::kTrim},       {"unique", Filter::kUnique},
      {"upper", Filter::kUpper},     {"values", Filter::kValues},
  };
  for (const auto& [n, f] : kFilters) {
    if (n == name) return f;
  }
  return std::nullopt;
}

std::optional<Test> find_test(std::string_view name) {
  static constexpr std::pair<std::string_view, Test> kTests[] = {
      {"boolean", Test::kBoolean},     {"callable", Test::kCallable},
      {"defined", Test::kDefined},     {"divisibleby", Test::kDivisibleBy},
      {"eq", Test::kEqualTo},          {"equalto", Test::kEqualTo},
      {"==", Test::kEqualTo},          {"even", Test::kEven},
      {"false", Test::kFalse},         {"float", Test::kFloat},
      {"ge", Test::kGreaterEqual},     {">=", Test::kGreaterEqual},
      {"gt", Test::kGreaterThan},      {"greaterthan", Test::kGreaterThan},
      {">", Test::kGreaterThan},       {"in", Test::kIn},
      {"integer", Test::kInteger},     {"iterable", Test::kIterable},
      {"le", Test::kLessEqual},        {"<=", Test::kLessEqual},
      {"lower", Test::kLower},         {"lt", Test::kLessThan},
      {"lessthan", Test::kLessThan},   {"<", Test::kLessThan},
      {"mapping", Test::kMapping},     {"ne", Test::kNotEqualTo},
      {"!=", Test::kNotEqualTo},       {"none", Test::kNone},
      {"number", Test::kNumber},       {"odd", Test::kOdd},
      {"sameas", Test::kSameAs},       {"sequence", Test::kSequence},
      {"string", Test::kString},       {"true", Test::kTrue},
      {"undefined", Test::kUndefined}, {"upper", Test::kUpper},
  };
  for (const auto& [n, t] : kTests) {
    if (n == name) return t;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------

Value apply_filter(Filter filter, std::string_view name, const Value& operand, const CallArgs& args,
                   RenderContext& context) {
  switch (filter) {
    case Filter::kSafe:
      no_argument_filter(name, args);
      return operand;
    case Filter::kTojson:
      return tojson_filter(operand, args);
    case Filter::kAbs:
      no_argument_filter(name, args);
      if (operand.is_int()) {
        if (operand.as_int() == INT64_MIN) return Value::floating(-static_cast<double>(INT64_MIN));
        return Value::integer(std::llabs(operand.as_int()));
      }
      if (operand.is_float()) return Value::floating(std::fabs(operand.as_float()));
      if (operand.is_bool()) return Value::integer(operand.as_bool() ? 1 : 0);
      fail_type(name, operand);
    case Filter::kBatch:
      return batch_filter(operand, args, context);
    case Filter::kBool:
      no_argument_filter(name, args);
      return Value::boolean(truthy(operand));
    case Filter::kCapitalize:
      no_argument_filter(name, args);
      return Value::string(capitalize(string_operand(name, operand)));
    case Filter::kTitle:
      no_argument_filter(name, args);
      return Value::string(title_case(string_operand(name, operand)));
    case Filter::kLower:
      no_argument_filter(name, args);
      return Value::string(to_lower(string_operand(name, operand)));
    case Filter::kUpper:
      no_argument_filter(name, args);
      return Value::string(to_upper(string_operand(name, operand)));
    case Filter::kTrim: {
      const ArgReader reader(name, args, {"chars"});
      const std::string_view s = string_operand(name, operand);
      const std::optional<std::string> chars = reader.get_string(0);
      return Value::string(chars ? strip_chars(s, *chars, true, true) : js_trim(s));
    }
    case Filter::kDefault: {
      const ArgReader reader(name, args, {"default_value", "boolean"});
      const Value* fallback = reader.get(0);
      const bool boolean = reader.get_bool(1, false);
      if (operand.is_undefined() || (boolean && !truthy(operand))) {
        return fallback != nullptr ? *fallback : Value::string("");
      }
      return operand;
    }
    case Filter::kDictsort:
      return dictsort(operand, args, context);
    case Filter::kEscape: {
      no_argument_filter(name, args);
      return context.make_string(
          html_escape(operand.is_none() ? std::string("None") : display_string(operand)));
    }
    case Filter::kFirst:
    case Filter::kLast: {
      no_argument_filter(name, args);
      if (operand.is_list()) {
        const auto& items = operand.as_list();
        if (items.empty()) return Value();
        return filter == Filter::kFirst ? items.front() : items.back();
      }
      if (operand.is_undefined()) return Value();
      const std::vector<Value> items = iterate(name, operand);
      if (items.empty()) return Value();
      return filter == Filter::kFirst ? items.front() : items.back();
    }
    case Filter::kFloat: {
      const ArgReader reader(name, args, {"default"});
      const Value fallback = reader.get(0) != nullptr ? *reader.get(0) : Value::floating(0.0);
      if (operand.is_float()) return operand;
      if (operand.is_int()) return Value::floating(static_cast<double>(operand.as_int()));
      if (operand.is_bool()) return Value::floating(operand.as_bool() ? 1.0 : 0.0);
      if (operand.is_string()) {
        const std::optional<double> parsed = parse_python_float(operand.as_string());
        return parsed ? Value::floating(*parsed) : fallback;
      }
      return fallback;
    }
    case Filter::kInt: {
      const ArgReader reader(name, args, {"default", "base"});
      const Value fallback = reader.get(0) != nullptr ? *reader.get(0) : Value::integer(0);
      if (reader.get_int(1, 10) != 10) reader.fail("only base 10 is supported");
      if (operand.is_int()) return operand;
      if (operand.is_bool()) return Value::integer(operand.as_bool() ? 1 : 0);
      if (operand.is_float()) {
        const double x = operand.as_float();
        if (!std::isfinite(x) || std::fabs(x) >= 9.2e18) return fallback;
        return Value::integer(static_cast<int64_t>(std::trunc(x)));
      }
      if (operand.is_string()) {
        if (const auto i = parse_python_int(operand.as_string())) return Value::integer(*i);
        if (const auto f = parse_python_float(operand.as_string());
            f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) {
          return Value::integer(static_cast<int64_t>(std::trunc(*f)));
        }
      }
      return fallback;
    }
    case Filter::kIndent:
      return indent_filter(operand, args, context);
    case Filter::kItems:
    case Filter::kKeys:
    case Filter::kValues: {
      no_argument_filter(name, args);
      if (operand.is_undefined()) return Value::list({});
      if (!operand.is_dict()) fail_type(name, operand);
      std::vector<Value> out;
      for (const auto& [key, value] : operand.as_dict().entries) {
        if (filter == Filter::kItems)
          out.push_back(make_pair(key, value));
        else if (filter == Filter::kKeys)
          out.push_back(Value::string(key));
        else
          out.push_back(value);
      }
      return make_list(std::move(out), context);
    }
    case Filter::kJoin:
      return join_filter(operand, args, context);
    case Filter::kLength:
      no_argument_filter(name, args);
      return length_of(operand);
    case Filter::kList:
      no_argument_filter(name, args);
      if (operand.is_list()) return operand;
      return make_list(iterate(name, operand), context);
    case Filter::kMap:
      return map_filter(operand, args, context);
    case Filter::kSelect:
      return select_filter(name, operand, args, false, true, context);
    case Filter::kReject:
      return select_filter(name, operand, args, false, false, context);
    case Filter::kSelectattr:
      return select_filter(name, operand, args, true, true, context);
    case Filter::kRejectattr:
      return select_filter(name, operand, args, true, false, context);
    case Filter::kReplace: {
      const ArgReader reader(name, args, {"old", "new", "count"});
      if (reader.get(0) == nullptr || reader.get(1) == nullptr) reader.fail("needs the old and new strings");
      const std::string_view from = require_string("replace", *reader.get(0));
      const std::string_view to = require_string("replace", *reader.get(1));
      return context.make_string(
          replace_all(string_operand(name, operand), from, to, reader.get_int(2, -1), context));
    }
    case Filter::kReverse: {
      no_argument_filter(name, args);
      if (operand.is_string()) {
        std::vector<Value> chars = iterate(name, operand);
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
        return Value::string(std::move(out));
      }
      std::vector<Value> items = iterate(name, operand);
      std::reverse(items.begin(), items.end());
      return make_list(std::move(items), context);
    }
    case Filter::kRound: {
      const ArgReader reader(name, args, {"precision", "method"});
      return round_value(operand, reader.get_int(0, 0), reader.get_string(1).value_or("common"));
    }
    case Filter::kSort:
      return sort_filter(operand, args, context);
    case Filter::kString:
      no_argument_filter(name, args);
      if (operand.is_string()) return operand;
      if (operand.is_none()) return Value::string("None");  // Python's str(None); the reference raises
      return context.make_string(display_string(operand));
    case Filter::kUnique:
      return unique_filter(operand, args, context);
  }
  throw JinjaError("unknown filter '" + std::string(name) + "'");
}

bool apply_test(Test test, const Value& operand, const CallArgs& args) {
  const Value* argument = args.positional.empty() ? nullptr : &args.positional[0];
  auto need_argument = [&]() -> const Value& {
    if (argument == nullptr) throw JinjaError("this test needs an argument");
    return *argument;
  };
  switch (test) {
    case Test::kBoolean:
      return operand.is_bool();
    case Test::kCallable:
      return operand.is_callable();
    case Test::kDefined:
      return !operand.is_undefined();
    case Test::kUndefined:
      return operand.is_undefined();
    case Test::kNone:
      return operand.is_none();
    case Test::kTrue:
      return operand.is_bool() && operand.as_bool();
    case Test::kFalse:
      return operand.is_bool() && !operand.as_bool();
    case Test::kString:
      return operand.is_string();
    case Test::kNumber:
      return operand.is_number();
    case Test::kInteger:
      return operand.is_int();
    case Test::kFloat:
      return operand.is_float();
    case Test::kMapping:
      return operand.is_dict();
    case Test::kIterable:  // what a for loop takes (Python: anything with __iter__)
      return operand.is_list() || operand.is_string() || operand.is_dict();
    case Test::kSequence:
      return operand.is_list() || operand.is_string() || operand.is_dict();
    case Test::kLower:
      return operand.is_string() && to_lower(operand.as_string()) == operand.as_string();
    case Test::kUpper:
      return operand.is_string() && to_upper(operand.as_string()) == operand.as_string();
    case Test::kOdd:
    case Test::kEven:
      if (!operand.is_int()) fail_type(test == Test::kOdd ? "odd" : "even", operand);
      return (operand.as_int() % 2 != 0) == (test == Test::kOdd);
    case Test::kDivisibleBy: {
      const Value& divisor = need_argument();
      if (!operand.is_int() || !divisor.is_int())
        fail_type("divisibleby", operand.is_int() ? divisor : operand);
      if (divisor.as_int() == 0) throw JinjaError("divisibleby: division by zero");
      return operand.as_int() % divisor.as_int() == 0;
    }
    case Test::kEqualTo:
      return strict_equal(operand, need_argument());
    case Test::kNotEqualTo:
      return !strict_equal(operand, need_argument());
    case Test::kSameAs: {
      const Value& other = need_argument();
      if (operand.kind() != other.kind()) return false;
      if (operand.payload_identity() != nullptr)
        return operand.payload_identity() == other.payload_identity();
      return strict_equal(operand, other);
    }
    case Test::kLessThan:
      return compare_values(operand, need_argument()) < 0;
    case Test::kLessEqual:
      return compare_values(operand, need_argument()) <= 0;
    case Test::kGreaterThan:
      return compare_values(operand, need_argument()) > 0;
    case Test::kGreaterEqual:
      return compare_values(operand, need_argument()) >= 0;
    case Test::kIn: {
      const Value& container = need_argument();
      if (container.is_list()) {
        return std::any_of(container.as_list().begin(), container.as_list().end(),
                           [&](const Value& item) { return strict_equal(operand, item); });
      }
      if (container.is_string() && operand.is_string())
        return container.as_string().find(operand.as_string()) != std::string::npos;
      if (container.is_dict() && operand.is_string())
        return container.as_dict().find(operand.as_string()) != nullptr;
      if (container.is_undefined()) return false;
      fail_type("in", container);
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------
// Attributes, items, methods.

namespace {

constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "dictsort"};
constexpr std::string_view kStringMethods[] = {
    "upper",      "lower",    "strip",      "lstrip",  "rstrip",  "title",   "capitalize",
    "startswith", "endswith", "split",      "rsplit",  "replace", "find",    "rfind",
    "count",      "join",     "splitlines", "isdigit", "isalpha", "isspace", "index"};

bool is_method_of(const Value& receiver, std::string_view name) {
  if (receiver.is_dict())
    return std::find(std::begin(kDictMethods), std::end(kDictMethods), name) != std::end(kDictMethods);
  if (receiver.is_string()) {
    return std::find(std::begin(kStringMethods), std::end(kStringMethods), name) != std::end(kStringMethods);
  }
  return false;
}

Value string_method(const std::string& s, std::string_view name, const CallArgs& args,
                    RenderContext& context) {
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    no_argument_filter(name, args);
    if (name == "upper") return context.make_string(to_upper(s));
    if (name == "lower") return context.make_string(to_lower(s));
    if (name == "title") return context.make_string(title_case(s));
    return context.make_string(capitalize(s));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    // Python: strip(chars) removes those characters; without chars, whitespace (the reference's trim).
    const ArgReader reader(name, args, {"chars"});
    const std::optional<std::string> chars = reader.get_string(0);
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    if (chars) return Value::string(strip_chars(s, *chars, left, right));
    return Value::string(left && right ? js_trim(s) : left ? js_trim_start(s) : js_trim_end(s));
  }
  if (name == "startswith" || name == "endswith") {
    const ArgReader reader(name, args, {"prefix"});
    if (reader.get(0) == nullptr) reader.fail("needs an argument");
    return Value::boolean(affix_matches(name, s, *reader.get(0), name == "startswith"));
  }
  if (name == "split" || name == "rsplit") {
    const ArgReader reader(name, args, {"sep", "maxsplit"});
    return make_list(split_string(s, reader.get(0), reader.get_int(1, -1), name == "rsplit"), context);
  }
  if (name == "replace") {
    const ArgReader reader(name, args, {"old", "new", "count"});
    if (reader.get(0) == nullptr || reader.get(1) == nullptr) reader.fail("needs the old and new strings");
    return context.make_string(replace_all(s, require_string("replace", *reader.get(0)),
                                           require_string("replace", *reader.get(1)), reader.get_int(2, -1),
                                           context));
  }
  if (name == "find" || name == "rfind" || name == "index") {
    const ArgReader reader(name, args, {"sub"});
    if (reader.get(0) == nullptr) reader.fail("needs an argument");
    const std::string_view sub = require_string(name, *reader.get(0));
    const size_t hit = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (hit == std::string::npos) {
      if (name == "index") throw JinjaError("index: substring not found");
      return Value::integer(-1);
    }
    return Value::integer(code_point_index(s, hit));
  }
  if (name == "count") {
    const ArgReader reader(name, args, {"sub"});
    if (reader.get(0) == nullptr) reader.fail("needs an argument");
    const std::string_view sub = require_string(name, *reader.get(0));
    if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
    int64_t count = 0;
    for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++count;
    return Value::integer(count);
  }
  if (name == "join") {
    const ArgReader reader(name, args, {"iterable"});
    if (reader.get(0) == nullptr) reader.fail("needs an argument");
    std::string out;
    bool first = true;
    for (const Value& item : iterate("join", *reader.get(0))) {
      if (!first) out += s;
      first = false;
      out += require_string("join", item);
      context.check_string_size(out.size());
    }
    return context.make_string(std::move(out));
  }
  if (name == "splitlines") {
    no_argument_filter(name, args);
    std::vector<Value> lines;
    size_t start = 0;
    for (size_t pos = 0; pos < s.size(); ++pos) {
      if (s[pos] == '\n' || s[pos] == '\r') {
        lines.push_back(Value::string(s.substr(start, pos - start)));
        if (s[pos] == '\r' && pos + 1 < s.size() && s[pos + 1] == '\n') ++pos;
        start = pos + 1;
      }
    }
    if (start < s.size()) lines.push_back(Value::string(s.substr(start)));
    return make_list(std::move(lines), context);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace") {
    no_argument_filter(name, args);
    if (s.empty()) return Value::boolean(false);
    for (size_t pos = 0; pos < s.size();) {
      const char32_t cp = next_code_point(s, pos);
      const bool ok = name == "isdigit" ? (cp >= '0' && cp <= '9')
                      : name == "isspace"
                          ? is_js_whitespace(cp)
                          : ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp >= 0x80);
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  throw JinjaError("strings have no method '" + std::string(name) + "'");
}

Value dict_method(const Value& dict, std::string_view name, const CallArgs& args, RenderContext& context) {
  if (name == "get") {
    const ArgReader reader(name, args, {"key", "default"});
    if (reader.get(0) == nullptr) reader.fail("needs a key");
    const Value& key = *reader.get(0);
    if (!key.is_string()) return reader.get(1) != nullptr ? *reader.get(1) : Value::none();
    const Value* found = dict.as_dict().find(key.as_string());
    if (found != nullptr) return *found;
    return reader.get(1) != nullptr ? *reader.get(1) : Value::none();
  }
  if (name == "items") return apply_filter(Filter::kItems, name, dict, args, context);
  if (name == "keys") return apply_filter(Filter::kKeys, name, dict, args, context);
  if (name == "values") return apply_filter(Filter::kValues, name, dict, args, context);
  if (name == "dictsort") return dictsort(dict, args, context);
  throw JinjaError("dicts have no method '" + std::string(name) + "'");
}

int64_t normalize_index(int64_t index, size_t size) {
  return index < 0 ? index + static_cast<int64_t>(size) : index;
}

}  // namespace

Value get_attribute(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kDict: {
      if (const Value* found = object.as_dict().find(name)) return *found;
      if (is_method_of(object, name))
        return Value::callable(std::make_shared<BoundMethod>(object, std::string(name)));
      return Value();
    }
    case Value::Kind::kNamespace: {
      const Value* found = object.as_namespace().find(name);
      return found != nullptr ? *found : Value();
    }
    case Value::Kind::kList:
      if (name == "length") return Value::integer(static_cast<int64_t>(object.as_list().size()));
      return Value();
    case Value::Kind::kString:
      if (name == "length") return Value::integer(static_cast<int64_t>(code_point_count(object.as_string())));
      if (is_method_of(object, name))
        return Value::callable(std::make_shared<BoundMethod>(object, std::string(name)));
      return Value();
    default:
      return Value();
  }
}

Value get_item(const Value& object, const Value& key) {
  if (key.is_string()) return get_attribute(object, key.as_string());
  if (!key.is_int()) {
    if (object.is_dict() || object.is_namespace()) return Value();
    throw JinjaError("cannot index a " + std::string(type_name(object)) + " with a " +
                     std::string(type_name(key)));
  }
  if (object.is_list()) {
    const auto& items = object.as_list();
    const int64_t i = normalize_index(key.as_int(), items.size());
    if (i < 0 || i >= static_cast<int64_t>(items.size())) return Value();
    return items[static_cast<size_t>(i)];
  }
  if (object.is_string()) {
    const std::string& s = object.as_string();
    int64_t i = key.as_int();
    if (i < 0) i += static_cast<int64_t>(code_point_count(s));
    if (i < 0) return Value();
    size_t pos = 0;
    for (int64_t n = 0; n < i && pos < s.size(); ++n) next_code_point(s, pos);
    if (pos >= s.size()) return Value();
    const size_t start = pos;
    next_code_point(s, pos);
    return Value::string(s.substr(start, pos - start));
  }
  if (object.is_dict() || object.is_namespace()) return Value();
  throw JinjaError("cannot index a " + std::string(type_name(object)) + " with an integer");
}

std::optional<Value> call_method(const Value& receiver, std::string_view name, const CallArgs& args,
                                 RenderContext& context) {
  if (!is_method_of(receiver, name)) return std::nullopt;
  if (receiver.is_string()) return string_method(receiver.as_string(), name, args, context);
  return dict_method(receiver, name, args, context);
}

Value slice_value(const Value& object, const Value& start_value, const Value& stop_value,
                  const Value& step_value, RenderContext& context) {
  auto bound = [](const Value& v, std::string_view what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int()) throw JinjaError(std::string("slice ") + std::string(what) + " must be an integer");
    return v.as_int();
  };
  const std::optional<int64_t> start_bound = bound(start_value, "start");
  const std::optional<int64_t> stop_bound = bound(stop_value, "stop");
  const int64_t step = bound(step_value, "step").value_or(1);
  if (step == 0) throw JinjaError("slice step cannot be zero");

  // A string is sliced by code point: `boundaries` holds the byte offset of each one, then the end.
  std::vector<size_t> boundaries;
  int64_t size = 0;
  if (object.is_list()) {
    size = static_cast<int64_t>(object.as_list().size());
  } else if (object.is_string()) {
    const std::string& s = object.as_string();
    for (size_t pos = 0; pos < s.size(); next_code_point(s, pos)) boundaries.push_back(pos);
    size = static_cast<int64_t>(boundaries.size());
    boundaries.push_back(s.size());
  } else {
    throw JinjaError("cannot slice a " + std::string(type_name(object)));
  }
  // Python's slice.indices().
  auto clamp_bound = [&](std::optional<int64_t> b, int64_t fallback) {
    if (!b) return fallback;
    int64_t v = *b;
    if (v < 0) {
      v += size;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= size) {
      v = step < 0 ? size - 1 : size;
    }
    return v;
  };
  const int64_t start = clamp_bound(start_bound, step < 0 ? size - 1 : 0);
  const int64_t stop = clamp_bound(stop_bound, step < 0 ? -1 : size);
  if (object.is_list()) {
    const std::vector<Value>& items = object.as_list();
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
      out.push_back(items[static_cast<size_t>(i)]);
    return make_list(std::move(out), context);
  }
  const std::string& s = object.as_string();
  if (step == 1) {
    if (start >= stop) return Value::string("");
    const size_t begin = boundaries[static_cast<size_t>(start)];
    return context.make_string(s.substr(begin, boundaries[static_cast<size_t>(stop)] - begin));
  }
  std::string out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    const auto k = static_cast<size_t>(i);
    out.append(s, boundaries[k], boundaries[k + 1] - boundaries[k]);
  }
  return context.make_string(std::move(out));
}

// ---------------------------------------------------------------------------------------------------
// Globals.

Value find_global(std::string_view name) {
  using Which = GlobalFunction::Which;
  static const std::array<std::pair<std::string_view, Value>, 4> kGlobals = {{
      {"range", Value::callable(std::make_shared<GlobalFunction>(Which::kRange, "range"))},
      {"namespace", Value::callable(std::make_shared<GlobalFunction>(Which::kNamespace, "namespace"))},
      {"raise_exception",
       Value::callable(std::make_shared<GlobalFunction>(Which::kRaiseException, "raise_exception"))},
      {"strftime_now",
       Value::callable(std::make_shared<GlobalFunction>(Which::kStrftimeNow, "strftime_now"))},
  }};
  for (const auto& [n, v] : kGlobals) {
    if (n == name) return v;
  }
  return Value();
}

namespace {

Value call_range(const CallArgs& args, RenderContext& context) {
  if (!args.keyword.empty()) throw JinjaError("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3)
    throw JinjaError("range() takes 1 to 3 arguments");
  for (const Value& v : args.positional) {
    if (!v.is_int()) throw JinjaError("range() arguments must be integers, got " + std::string(type_name(v)));
  }
  int64_t start = 0;
  int64_t stop = args.positional[0].as_int();
  int64_t step = 1;
  if (args.positional.size() >= 2) {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
  }
  if (args.positional.size() == 3) step = args.positional[2].as_int();
  if (step == 0) throw JinjaError("range() step must not be zero");
  const double count = std::max(
      0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
  // Charged before anything is allocated, so range(10**12) fails at once.
  context.charge(static_cast<int64_t>(std::min(count, 9e18)));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
  return Value::list(std::move(items));
}

Value call_namespace(const CallArgs& args, RenderContext& context) {
  if (args.positional.size() > 1) throw JinjaError("namespace() takes at most 1 positional argument");
  DictData entries;
  if (args.positional.size() == 1) {
    const Value& source = args.positional[0];
    if (source.is_dict() || source.is_namespace()) {
      for (const auto& [key, value] : source.entries().entries) entries.set(key, value);
    } else if (source.is_list()) {
      for (const Value& pair : source.as_list()) {
        if (!pair.is_list() || pair.as_list().size() != 2 || !pair.as_list()[0].is_string()) {
          throw JinjaError("namespace() expects a dict or a list of [key, value] pairs");
        }
        entries.set(pair.as_list()[0].as_string(), pair.as_list()[1]);
      }
    } else {
      throw JinjaError("namespace() expects a dict, got " + std::string(type_name(source)));
    }
  }
  for (const auto& [key, value] : args.keyword) entries.set(key, value);
  return context.make_namespace(std::move(entries));
}

std::string strftime_civil(const std::string& format, const CivilTime& t) {
  std::tm tm{};
  tm.tm_year = t.year - 1900;
  tm.tm_mon = t.month - 1;
  tm.tm_mday = t.day;
  tm.tm_hour = t.hour;
  tm.tm_min = t.minute;
  tm.tm_sec = t.second;
  // timegm normalises the fields and fills in the weekday and day of the year without a time zone.
  const std::time_t seconds = timegm(&tm);
  gmtime_r(&seconds, &tm);
  if (format.empty()) return {};
  std::string out(format.size() * 4 + 64, '\0');
  for (int attempt = 0; attempt < 8; ++attempt) {
    const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
    if (n > 0) {
      out.resize(n);
      return out;
    }
    out.resize(out.size() * 4);
  }
  return {};  // only formats whose expansion is empty (e.g. "%p" in some locales) end here
}

}  // namespace

bool call_builtin(const Callable& fn, const CallArgs& args, RenderContext& context, Value& result) {
  if (const auto* method = dynamic_cast<const BoundMethod*>(&fn)) {
    std::optional<Value> r = call_method(method->receiver, method->method, args, context);
    if (!r) throw JinjaError("'" + method->method + "' is not callable");
    result = std::move(*r);
    return true;
  }
  const auto* global = dynamic_cast<const GlobalFunction*>(&fn);
  if (global == nullptr) return false;
  switch (global->which) {
    case GlobalFunction::Which::kRange:
      result = call_range(args, context);
      return true;
    case GlobalFunction::Which::kNamespace:
      result = call_namespace(args, context);
      return true;
    case GlobalFunction::Which::kRaiseException: {
      const ArgReader reader("raise_exception", args, {"message"});
      JinjaError error(reader.get(0) != nullptr ? display_string(*reader.get(0)) : std::string());
      error.raised_by_template = true;
      throw error;
    }
    case GlobalFunction::Which::kStrftimeNow: {
      const ArgReader reader("strftime_now", args, {"format"});
      const std::optional<std::string> format = reader.get_string(0);
      if (!format) reader.fail("needs a format string");
      result = context.make_string(strftime_civil(*format, context.now()));
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------

RenderContext::RenderContext(const RenderLimits& limits, std::optional<CivilTime> pinned_now)
    : limits_(limits), work_left_(limits.max_work), pinned_now_(pinned_now) {}

RenderContext::~RenderContext() {
  // A namespace may hold itself (directly or through a list); clearing every namespace breaks such cycles
  // so that shared ownership releases everything. Entries are moved out first so that no destructor runs
  // while a namespace is being modified.
  for (const auto& ns : namespaces_) {
    auto entries = std::move(ns->entries);
    ns->entries.clear();
  }
}

Value RenderContext::make_namespace(DictData entries) {
  charge(static_cast<int64_t>(entries.entries.size()) + 1);
  auto data = std::make_shared<DictData>(std::move(entries));
  namespaces_.push_back(data);
  return Value::make_namespace(std::move(data));
}

CivilTime RenderContext::now() const {
  if (pinned_now_) return *pinned_now_;
  const std::time_t seconds = std::time(nullptr);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  return CivilTime{tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
}

void RenderContext::throw_budget_exhausted() const {
  throw JinjaError("template exceeded its work limit (" + std::to_string(limits_.max_work) +
                   " steps): a loop or recursion that does not end?");
}

void RenderContext::throw_string_too_large(size_t bytes) const {
  throw JinjaError("template built a string of " + std::to_string(bytes) + " bytes, over the limit of " +
                   std::to_string(limits_.max_string_bytes));
}

}  // namespace helium::jinja
