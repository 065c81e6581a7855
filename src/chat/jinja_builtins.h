// chat/jinja_builtins.h — what templates can call without defining it: filters (`x | tojson`), tests
// (`x is defined`), methods of strings and dicts (`s.startswith(...)`, `d.items()`), and the global
// functions (range, namespace, raise_exception, strftime_now); plus the per-render context they share
// with the interpreter (resource limits, the pinned clock, namespaces to release).
// Owns: the semantics of every builtin. Must not: evaluate AST nodes (the interpreter passes values).
//
// Semantics follow @huggingface/jinja (the reference the tests compare with, byte for byte). Where the
// reference lacks a builtin or raises and Python Jinja (what transformers runs) renders, helium follows
// Python; jinja_interpreter.h lists the few places where the two render differently and which one
// helium follows.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace helium::jinja {

enum class Filter : uint8_t {
  kAbs,
  kBatch,
  kBool,
  kCapitalize,
  kDefault,
  kDictsort,
  kEscape,
  kFirst,
  kFloat,
  kIndent,
  kInt,
  kItems,
  kJoin,
  kKeys,
  kLast,
  kLength,
  kList,
  kLower,
  kMap,
  kReject,
  kRejectattr,
  kReplace,
  kReverse,
  kRound,
  kSafe,
  kSelect,
  kSelectattr,
  kSort,
  kString,
  kTitle,
  kTojson,
  kTrim,
  kUnique,
  kUpper,
  kValues,
};
// Resolves a filter name (aliases included: d, e, count); nullopt for an unknown name.
std::optional<Filter> find_filter(std::string_view name);

enum class Test : uint8_t {
  kBoolean,
  kCallable,
  kDefined,
  kDivisibleBy,
  kEqualTo,
  kEven,
  kFalse,
  kFloat,
  kGreaterEqual,
  kGreaterThan,
  kIn,
  kInteger,
  kIterable,
  kLessEqual,
  kLessThan,
  kLower,
  kMapping,
  kNone,
  kNotEqualTo,
  kNumber,
  kOdd,
  kSameAs,
  kSequence,
  kString,
  kTrue,
  kUndefined,
  kUpper,
};
std::optional<Test> find_test(std::string_view name);

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Bounds on one render, so that a hostile template can neither run forever nor exhaust memory or stack.
struct RenderLimits {
  // Evaluated nodes + loop iterations + list items and string bytes/64 produced. A real template with
  // 6,000 messages (gpt-oss, whose history scan is quadratic) needs 54M; spending all of it takes a few
  // seconds.
  int64_t max_work = 100'000'000;
  size_t max_string_bytes = 64u << 20;  // any one string, the output included
  int max_call_depth = 64;              // nested macro calls
  int max_eval_depth = 1000;            // nested evaluation (expressions, statements and calls)
};

// A clock reading as strftime_now() formats it (local civil time).
struct CivilTime {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0, second = 0;
};

class RenderContext {
 public:
  RenderContext(const RenderLimits& limits, std::optional<CivilTime> pinned_now);
  ~RenderContext();  // releases every namespace's entries (breaking reference cycles through them)
  RenderContext(const RenderContext&) = delete;
  RenderContext& operator=(const RenderContext&) = delete;

  const RenderLimits& limits() const { return limits_; }
  // Spends `units` of the work budget; throws when it is used up.
  void charge(int64_t units) {
    work_left_ -= units;
    if (work_left_ < 0) throw_budget_exhausted();
  }
  // Throws when a string of `bytes` would exceed the limit (call before building it).
  void check_string_size(size_t bytes) const {
    if (bytes > limits_.max_string_bytes) throw_string_too_large(bytes);
  }
  // A string result: checks its size and charges for the bytes produced.
  Value make_string(std::string s) {
    check_string_size(s.size());
    charge(static_cast<int64_t>(s.size() / 64));
    return Value::string(std::move(s));
  }
  Value make_namespace(DictData entries);
  CivilTime now() const;

 private:
  [[noreturn]] void throw_budget_exhausted() const;
  [[noreturn]] void throw_string_too_large(size_t bytes) const;

  RenderLimits limits_;
  int64_t work_left_;
  std::optional<CivilTime> pinned_now_;
  std::vector<std::shared_ptr<DictData>> namespaces_;
};

// `operand | filter(args)`.
Value apply_filter(Filter filter, std::string_view name, const Value& operand, const CallArgs& args,
                   RenderContext& context);
// `operand is test(args)` (without `not`).
bool apply_test(Test test, const Value& operand, const CallArgs& args);

// Attribute lookup as the reference does it: dict keys (then dict methods), namespace entries, string and
// list `length`, string/dict methods as bound callables; undefined when there is nothing of that name.
Value get_attribute(const Value& object, std::string_view name);
// `object[key]`: dict/namespace by string key, list/string by (negative) integer index; undefined when
// missing.
Value get_item(const Value& object, const Value& key);
// Calls the method `name` of a string or dict directly (no bound callable is built); nullopt when the
// receiver has no such method (the caller then reports what it is).
std::optional<Value> call_method(const Value& receiver, std::string_view name, const CallArgs& args,
                                 RenderContext& context);
// Python slicing of a list or string (code points).
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step,
                  RenderContext& context);

// Global functions visible to every template (after the template's own variables).
Value find_global(std::string_view name);
// Calls a builtin callable (a global function or a bound method); false when `fn` is not one.
bool call_builtin(const Callable& fn, const CallArgs& args, RenderContext& context, Value& result);

}  // namespace helium::jinja
