// chat/jinja_value.h — the values a Jinja chat template computes with: undefined, none, booleans,
// integers, floats, strings, lists, ordered dicts, namespaces and callables.
// Owns: the Value type, conversion from JSON, truthiness, equality and ordering, and the two ways a value
// becomes text (as `{{ value }}` prints it, and as tojson writes it). Must not: evaluate templates or
// know the AST (callables are opaque here).
//
// Values are cheap to copy: strings, lists and dicts are immutable and shared (a template cannot change
// them, as in transformers' ImmutableSandboxedEnvironment); a namespace is the one mutable, shared object
// (`{% set ns.x = ... %}`). Dicts keep insertion order because tojson output must match the reference.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace helium::jinja {

// Every error inside the interpreter is thrown as a JinjaError and turned into a helium::Status at the
// module border (chat_template.cpp); `offset` is a byte offset into the template source when known.
class JinjaError : public std::runtime_error {
 public:
  static constexpr size_t kNoOffset = static_cast<size_t>(-1);
  explicit JinjaError(const std::string& message, size_t offset = kNoOffset)
      : std::runtime_error(message), offset_(offset) {}
  size_t offset() const { return offset_; }
  void set_offset(size_t offset) { offset_ = offset; }
  // raise_exception() errors carry the template author's message and are reported as such.
  bool raised_by_template = false;

 private:
  size_t offset_;
};

// Lists and dicts deeper than this are refused (input JSON and values a template builds alike), so that
// no recursive walk over a value (tojson, equality, destruction) can exhaust the stack.
inline constexpr uint32_t kMaxValueDepth = 256;

class Value;

// Something a template can call: a macro, a caller block, a builtin function or a bound method. The
// interpreter defines the kinds; a value only holds and compares them.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string_view name() const = 0;
};

struct ListData {
  std::vector<Value> items;
  uint32_t depth = 1;
};

struct DictData {
  std::vector<std::pair<std::string, Value>> entries;  // insertion order; keys unique
  uint32_t depth = 1;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() = default;  // undefined
  static Value none() { return Value(None{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value floating(double f) { return Value(f); }
  static Value string(std::string s) { return Value(std::make_shared<const std::string>(std::move(s))); }
  static Value string(std::string_view s) { return string(std::string(s)); }
  static Value string(const char* s) { return string(std::string(s)); }
  // Lists and dicts compute their nesting depth and throw a JinjaError beyond kMaxValueDepth.
  static Value list(std::vector<Value> items);
  static Value dict(std::vector<std::pair<std::string, Value>> entries);  // keys must be unique
  static Value make_namespace(std::shared_ptr<DictData> entries) {
    return Value(NamespacePtr{std::move(entries)});
  }
  static Value callable(std::shared_ptr<const Callable> fn) { return Value(std::move(fn)); }
  // JSON -> value: integers stay integers, other numbers become floats, objects keep their key order.
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  double as_number() const { return is_int() ? static_cast<double>(as_int()) : as_float(); }
  const std::string& as_string() const { return *std::get<StringPtr>(v_); }
  const std::vector<Value>& as_list() const { return std::get<ListPtr>(v_)->items; }
  const DictData& as_dict() const { return *std::get<DictPtr>(v_); }
  DictData& as_namespace() const { return *std::get<NamespacePtr>(v_).entries; }
  const std::shared_ptr<DictData>& namespace_ptr() const { return std::get<NamespacePtr>(v_).entries; }
  const Callable& as_callable() const { return *std::get<CallablePtr>(v_); }
  const std::shared_ptr<const Callable>& callable_ptr() const { return std::get<CallablePtr>(v_); }
  // Dict or namespace entries (the two attribute containers).
  const DictData& entries() const { return is_dict() ? as_dict() : as_namespace(); }
  // Nesting depth: 1 + the deepest child for lists and dicts, 1 for everything else.
  uint32_t depth() const;

  // Identity of the shared payload, for `sameas` and for equality of callables/namespaces.
  const void* payload_identity() const;

 private:
  struct None {};
  using StringPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const DictData>;
  struct NamespacePtr {
    std::shared_ptr<DictData> entries;
  };
  using CallablePtr = std::shared_ptr<const Callable>;
  // The order of the alternatives is the order of Kind.
  using Storage = std::variant<std::monostate, None, bool, int64_t, double, StringPtr, ListPtr, DictPtr,
                               NamespacePtr, CallablePtr>;

  explicit Value(Storage v) : v_(std::move(v)) {}

  Storage v_;
};

// Python truthiness (the reference's __bool__): empty strings, lists and dicts, 0, 0.0, none and undefined
// are false; namespaces and callables are true.
bool truthy(const Value& v);

// `==`: numbers (and booleans as 0/1) by value, strings by content, none only to none and undefined only
// to undefined (Python; the reference keeps JavaScript's null == undefined), lists and dicts by content
// (Python; the reference compares identity), callables and namespaces by identity.
bool loose_equal(const Value& a, const Value& b);
// `in`, `equalto` and `unique` as the reference evaluates them (JavaScript ===): like loose_equal, but
// booleans only equal booleans and none never equals undefined.
bool strict_equal(const Value& a, const Value& b);
// Ordering for `<` and friends and for sort: numbers (booleans as 0/1) numerically, strings by code
// point (optionally after lower-casing), none with none and undefined with undefined as equal; any other
// pair throws.
int compare_values(const Value& a, const Value& b, bool case_sensitive = true);

// Python-style name of the type for error messages ("string", "list", "dict", ...).
std::string_view type_name(const Value& v);

// Python's repr of a float (shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan").
std::string float_repr(double f);

// How `{{ value }}` prints, as Python Jinja (and so transformers) prints it: undefined prints nothing,
// none "None", booleans "True"/"False", floats as float_repr, lists/dicts/namespaces as Python's repr
// (['a', 1, True, None], {'k': 'v'}; strings quoted and escaped as Python does).
void append_display(std::string& out, const Value& v);
std::string display_string(const Value& v);

struct JsonFormat {
  int indent = -1;            // < 0: single line
  std::string indent_string;  // used when indent >= 0 (" " * indent, or a string indent)
  bool ensure_ascii = false;
  bool sort_keys = false;  // by code point
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool undefined_as_null = true;  // tojson writes null; display strings write `undefined`
};
// tojson as transformers defines it (json.dumps with ensure_ascii=False), which the reference matches.
void append_json(std::string& out, const Value& v, const JsonFormat& format, uint32_t depth = 0);

}  // namespace helium::jinja
