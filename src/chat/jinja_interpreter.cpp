// chat/jinja_interpreter.cpp — see jinja_interpreter.h. A tree-walking evaluator: statements append to
// an output string, expressions return values. Errors are JinjaErrors; the innermost node that sees one
// without a location stamps its own offset on it.
#include "chat/jinja_interpreter.h"

#include <cmath>
#include <memory>
#include <string_view>

#include "chat/jinja_text.h"

namespace helium::jinja {

namespace {

// Variables of one scope. Scopes are shared because a call block's `caller` keeps the scope it was
// written in, and may outlive the statement that created it.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      for (const auto& [n, v] : s->variables) {
        if (n == name) return &v;
      }
    }
    return nullptr;
  }

  void set(std::string_view name, Value value) {
    for (auto& [n, v] : variables) {
      if (n == name) {
        v = std::move(value);
        return;
      }
    }
    variables.emplace_back(std::string(name), std::move(value));
  }

  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> variables;  // few per scope: a linear search is fastest
};
using ScopePtr = std::shared_ptr<Scope>;

class MacroCallable final : public Callable {
 public:
  explicit MacroCallable(const MacroDefinition& d) : definition(d) {}
  std::string_view name() const override { return definition.name; }
  const MacroDefinition& definition;
};

// The body of a call block, callable from the called macro as `caller(...)`.
class CallerCallable final : public Callable {
 public:
  CallerCallable(const MacroDefinition& d, ScopePtr s) : definition(d), scope(std::move(s)) {}
  std::string_view name() const override { return definition.name; }
  const MacroDefinition& definition;
  ScopePtr scope;
};

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

std::string op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSubtract:
      return "-";
    case BinaryOp::kMultiply:
      return "*";
    case BinaryOp::kDivide:
      return "/";
    case BinaryOp::kFloorDivide:
      return "//";
    case BinaryOp::kModulo:
      return "%";
    case BinaryOp::kPower:
      return "**";
    case BinaryOp::kLess:
      return "<";
    case BinaryOp::kGreater:
      return ">";
    case BinaryOp::kLessEqual:
      return "<=";
    case BinaryOp::kGreaterEqual:
      return ">=";
    default:
      return "?";
  }
}

bool is_numeric_like(const Value& v) {
  return v.is_int() || v.is_float() || v.is_bool();
}
int64_t as_integer(const Value& v) {
  return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int();
}
double as_double(const Value& v) {
  return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_number();
}

class Interpreter {
 public:
  Interpreter(const Program& program, RenderContext& context) : program_(program), context_(context) {}

  void run(const ScopePtr& globals, std::string& out) { exec_body(program_.body, globals, out); }

 private:
  class DepthGuard {
   public:
    explicit DepthGuard(Interpreter& in) : in_(in) {
      if (++in_.depth_ > in_.context_.limits().max_eval_depth) {
        throw JinjaError("template evaluation nested deeper than " +
                         std::to_string(in_.context_.limits().max_eval_depth) + " levels");
      }
    }
    ~DepthGuard() { --in_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Interpreter& in_;
  };

  void append_output(std::string& out, const Value& v) {
    if (v.is_undefined()) return;  // none prints "None", as in Python Jinja (the reference prints nothing)
    append_display(out, v);
    context_.check_string_size(out.size());
  }

  // ----- statements ------------------------------------------------------------------------------

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& stmt : body) {
      const Flow flow = exec(*stmt, scope, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
    try {
      return exec_unlocated(stmt, scope, out);
    } catch (JinjaError& error) {
      if (error.offset() == JinjaError::kNoOffset) error.set_offset(stmt.offset);
      throw;
    }
  }

  Flow exec_unlocated(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
    DepthGuard guard(*this);
    context_.charge(1);
    switch (stmt.kind) {
      case Stmt::Kind::kText:
        out += static_cast<const TextStmt&>(stmt).text;
        context_.check_string_size(out.size());
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        append_output(out, eval(*static_cast<const OutputStmt&>(stmt).value, scope));
        return Flow::kNormal;
      case Stmt::Kind::kIf: {
        const auto& node = static_cast<const IfStmt&>(stmt);
        for (const auto& [condition, body] : node.branches) {
          if (truthy(eval(*condition, scope))) return exec_body(body, scope, out);
        }
        return exec_body(node.else_body, scope, out);
      }
      case Stmt::Kind::kFor:
        return exec_for(static_cast<const ForStmt&>(stmt), scope, out);
      case Stmt::Kind::kSet:
        exec_set(static_cast<const SetStmt&>(stmt), scope);
        return Flow::kNormal;
      case Stmt::Kind::kMacro: {
        const auto& node = static_cast<const MacroStmt&>(stmt);
        scope->set(node.macro.name, Value::callable(std::make_shared<MacroCallable>(node.macro)));
        return Flow::kNormal;
      }
      case Stmt::Kind::kCallBlock: {
        const auto& node = static_cast<const CallBlockStmt&>(stmt);
        Value caller = Value::callable(std::make_shared<CallerCallable>(node.caller, scope));
        const CallArgs args = eval_args(node.call->args, scope);
        const Value callee = eval(*node.call->callee, scope);
        auto call_scope = std::make_shared<Scope>(scope);  // the called macro sees `caller` here
        call_scope->set("caller", std::move(caller));
        append_output(out, call_value(callee, args, call_scope, node.call->callee.get()));
        return Flow::kNormal;
      }
      case Stmt::Kind::kFilterBlock: {
        const auto& node = static_cast<const FilterBlockStmt&>(stmt);
        std::string text;
        exec_body(node.body, scope, text);
        Value value = context_.make_string(std::move(text));
        for (const FilterCall& filter : node.filters) value = apply_filter_call(filter, value, scope);
        append_output(out, value);
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  static void bind_targets(const std::vector<std::string>& targets, bool unpack, const Value& item,
                           Scope& scope) {
    if (!unpack) {
      scope.set(targets[0], item);
      return;
    }
    if (!item.is_list())
      throw JinjaError("cannot unpack a " + std::string(type_name(item)) + " into loop variables");
    const auto& parts = item.as_list();
    if (parts.size() != targets.size()) {
      throw JinjaError("cannot unpack " + std::to_string(parts.size()) + " values into " +
                       std::to_string(targets.size()) + " loop variables");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  }

  // The `loop` object of iteration i (a dict, as the reference makes it).
  static Value loop_info(const std::vector<Value>& items, size_t i) {
    static const std::string kKeys[9] = {"index", "index0", "revindex", "revindex0", "first",
                                         "last",  "length", "previtem", "nextitem"};
    const auto n = static_cast<int64_t>(items.size());
    const auto index = static_cast<int64_t>(i);
    const Value values[9] = {Value::integer(index + 1),
                             Value::integer(index),
                             Value::integer(n - index),
                             Value::integer(n - index - 1),
                             Value::boolean(i == 0),
                             Value::boolean(index == n - 1),
                             Value::integer(n),
                             i > 0 ? items[i - 1] : Value(),
                             index + 1 < n ? items[i + 1] : Value()};
    std::vector<std::pair<std::string, Value>> entries;
    entries.reserve(9);
    for (size_t k = 0; k < 9; ++k) entries.emplace_back(kKeys[k], values[k]);
    return Value::dict(std::move(entries));
  }

  Flow exec_for(const ForStmt& node, const ScopePtr& scope, std::string& out) {
    auto loop_scope = std::make_shared<Scope>(scope);
    const Value iterable = eval(*node.iterable, loop_scope);
    std::vector<Value> owned;
    const std::vector<Value>* items = &owned;
    switch (iterable.kind()) {
      case Value::Kind::kList:
        items = &iterable.as_list();
        break;
      case Value::Kind::kDict:
        for (const auto& entry : iterable.as_dict().entries) owned.push_back(Value::string(entry.first));
        break;
      case Value::Kind::kString:
        for (size_t pos = 0; pos < iterable.as_string().size();) {
          const size_t start = pos;
          next_code_point(iterable.as_string(), pos);
          owned.push_back(Value::string(iterable.as_string().substr(start, pos - start)));
        }
        break;
      case Value::Kind::kUndefined:
        break;  // Python iterates an undefined value as empty
      default:
        throw JinjaError("cannot loop over a " + std::string(type_name(iterable)));
    }
    std::vector<Value> filtered;
    if (node.condition) {
      // The condition sees the loop variables but not `loop` (whose length depends on the filtering).
      auto test_scope = std::make_shared<Scope>(loop_scope);
      for (const Value& item : *items) {
        context_.charge(1);
        test_scope->variables.clear();
        bind_targets(node.targets, node.unpack, item, *test_scope);
        if (truthy(eval(*node.condition, test_scope))) filtered.push_back(item);
      }
      items = &filtered;
    }
    if (items->empty()) return exec_body(node.else_body, loop_scope, out);
    for (size_t i = 0; i < items->size(); ++i) {
      context_.charge(1);
      if (node.uses_loop) {
        context_.charge(4);  // building `loop` costs about as much as four evaluated nodes
        loop_scope->set("loop", loop_info(*items, i));
      }
      bind_targets(node.targets, node.unpack, (*items)[i], *loop_scope);
      if (exec_body(node.body, loop_scope, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void exec_set(const SetStmt& node, const ScopePtr& scope) {
    Value value;
    if (node.value) {
      value = eval(*node.value, scope);
    } else {
      std::string text;
      exec_body(node.body, scope, text);
      value = context_.make_string(std::move(text));
    }
    if (node.namespace_object) {
      const Value target = eval(*node.namespace_object, scope);
      if (!target.is_namespace()) {
        throw JinjaError("cannot set '" + node.attribute + "' on a " + std::string(type_name(target)) +
                         " (only namespace() objects can be assigned to)");
      }
      target.as_namespace().set(node.attribute, std::move(value));
      return;
    }
    if (!node.unpack) {
      scope->set(node.names[0], std::move(value));
      return;
    }
    if (!value.is_list() || value.as_list().size() != node.names.size()) {
      throw JinjaError("cannot unpack " +
                       (value.is_list() ? std::to_string(value.as_list().size()) + " values"
                                        : "a " + std::string(type_name(value))) +
                       " into " + std::to_string(node.names.size()) + " variables");
    }
    for (size_t i = 0; i < node.names.size(); ++i) scope->set(node.names[i], value.as_list()[i]);
  }

  // ----- calls -----------------------------------------------------------------------------------

  CallArgs eval_args(const std::vector<Argument>& arguments, const ScopePtr& scope) {
    CallArgs args;
    // Positional arguments (and * unpacking) are evaluated before keyword arguments, as Python does.
    for (const Argument& arg : arguments) {
      if (arg.kind == Argument::Kind::kPositional) {
        args.positional.push_back(eval(*arg.value, scope));
      } else if (arg.kind == Argument::Kind::kSpread) {
        const Value spread = eval(*arg.value, scope);
        if (!spread.is_list()) throw JinjaError("* needs a list, got a " + std::string(type_name(spread)));
        args.positional.insert(args.positional.end(), spread.as_list().begin(), spread.as_list().end());
      }
    }
    auto add_keyword = [&](const std::string& name, Value value) {
      for (const auto& [key, existing] : args.keyword) {
        if (key == name) throw JinjaError("keyword argument '" + name + "' given twice");
      }
      args.keyword.emplace_back(name, std::move(value));
    };
    for (const Argument& arg : arguments) {
      if (arg.kind == Argument::Kind::kKeyword) {
        add_keyword(arg.name, eval(*arg.value, scope));
      } else if (arg.kind == Argument::Kind::kKeywordSpread) {
        const Value spread = eval(*arg.value, scope);
        if (!spread.is_dict()) throw JinjaError("** needs a dict, got a " + std::string(type_name(spread)));
        for (const auto& [key, value] : spread.as_dict().entries) add_keyword(key, value);
      }
    }
    return args;
  }

  Value call_macro(const MacroDefinition& macro, const CallArgs& args, const ScopePtr& parent) {
    if (call_depth_ >= context_.limits().max_call_depth) {
      throw JinjaError("macro calls nested deeper than " + std::to_string(context_.limits().max_call_depth) +
                       " (recursion without end?)");
    }
    ++call_depth_;
    struct Unwind {
      int& depth;
      ~Unwind() { --depth; }
    } unwind{call_depth_};

    auto scope = std::make_shared<Scope>(parent);
    const size_t n = macro.params.size();
    std::vector<bool> bound(n, false);
    for (size_t i = 0; i < n && i < args.positional.size(); ++i) {
      scope->set(macro.params[i].name, args.positional[i]);
      bound[i] = true;
    }
    if (args.positional.size() > n && !macro.takes_varargs) {
      throw JinjaError("macro '" + macro.name + "' takes not more than " + std::to_string(n) +
                       " argument(s), " + std::to_string(args.positional.size()) + " given");
    }
    std::vector<std::pair<std::string, Value>> extra_keywords;
    for (const auto& [key, value] : args.keyword) {
      size_t i = 0;
      while (i < n && macro.params[i].name != key) ++i;
      if (i == n) {
        if (!macro.takes_kwargs)
          throw JinjaError("macro '" + macro.name + "' has no parameter '" + key + "'");
        extra_keywords.emplace_back(key, value);
        continue;
      }
      if (bound[i]) throw JinjaError("macro '" + macro.name + "' got two values for '" + key + "'");
      scope->set(key, value);
      bound[i] = true;
    }
    if (macro.takes_varargs) {
      std::vector<Value> rest;
      for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
      scope->set("varargs", Value::list(std::move(rest)));
    }
    if (macro.takes_kwargs) scope->set("kwargs", Value::dict(std::move(extra_keywords)));
    // Every parameter is bound (to undefined) before any default is evaluated, so that a default never
    // sees an outer variable of a parameter's name.
    for (size_t i = 0; i < n; ++i) {
      if (!bound[i]) scope->set(macro.params[i].name, Value());
    }
    for (size_t i = 0; i < n; ++i) {
      if (!bound[i] && macro.params[i].default_value) {
        scope->set(macro.params[i].name, eval(*macro.params[i].default_value, scope));
      }
    }
    std::string out;
    exec_body(macro.body, scope, out);
    return context_.make_string(std::move(out));
  }

  // `callee_expr` (optional) names the callee in errors.
  Value call_value(const Value& fn, const CallArgs& args, const ScopePtr& scope, const Expr* callee_expr) {
    if (!fn.is_callable()) {
      if (callee_expr != nullptr && callee_expr->kind == Expr::Kind::kName) {
        const std::string& name = static_cast<const NameExpr*>(callee_expr)->name;
        if (fn.is_undefined()) throw JinjaError("'" + name + "' is undefined (not a macro or function)");
        throw JinjaError("'" + name + "' is a " + std::string(type_name(fn)) + ", not a macro or function");
      }
      throw JinjaError("cannot call a " + std::string(type_name(fn)));
    }
    const Callable& callable = fn.as_callable();
    if (const auto* macro = dynamic_cast<const MacroCallable*>(&callable)) {
      return call_macro(macro->definition, args, scope);  // macros see their caller's variables
    }
    if (const auto* caller = dynamic_cast<const CallerCallable*>(&callable)) {
      return call_macro(caller->definition, args, caller->scope);
    }
    Value result;
    if (call_builtin(callable, args, context_, result)) return result;
    throw JinjaError("cannot call '" + std::string(callable.name()) + "'");
  }

  Value eval_call(const CallExpr& node, const ScopePtr& scope) {
    const Expr& callee = *node.callee;
    if (callee.kind == Expr::Kind::kAttribute && !static_cast<const AttributeExpr&>(callee).index) {
      // obj.name(...): a callable stored under that name, else the builtin method (which Python prefers
      // for calls even when a dict has a key of the method's name, e.g. a JSON schema's "items").
      const auto& attribute = static_cast<const AttributeExpr&>(callee);
      const Value object = eval(*attribute.object, scope);
      Value member;
      if (object.is_dict() || object.is_namespace()) {
        if (const Value* found = object.entries().find(attribute.name)) member = *found;
      }
      if (!member.is_callable()) {
        const CallArgs args = eval_args(node.args, scope);
        if (std::optional<Value> result = call_method(object, attribute.name, args, context_))
          return std::move(*result);
        if (!member.is_undefined()) {
          throw JinjaError("'" + attribute.name + "' is a " + std::string(type_name(member)) +
                           ", not a function");
        }
        throw JinjaError("a " + std::string(type_name(object)) + " has no method '" + attribute.name + "'");
      }
      return call_value(member, eval_args(node.args, scope), scope, nullptr);
    }
    const Value fn = eval(callee, scope);
    return call_value(fn, eval_args(node.args, scope), scope, &callee);
  }

  Value apply_filter_call(const FilterCall& call, const Value& operand, const ScopePtr& scope) {
    try {
      return apply_filter(call.filter, call.name, operand, eval_args(call.args, scope), context_);
    } catch (JinjaError& error) {
      if (error.offset() == JinjaError::kNoOffset) error.set_offset(call.offset);
      throw;
    }
  }

  // ----- expressions -----------------------------------------------------------------------------

  Value eval(const Expr& expr, const ScopePtr& scope) {
    try {
      return eval_unlocated(expr, scope);
    } catch (JinjaError& error) {
      if (error.offset() == JinjaError::kNoOffset) error.set_offset(expr.offset);
      throw;
    }
  }

  Value eval_unlocated(const Expr& expr, const ScopePtr& scope) {
    DepthGuard guard(*this);
    context_.charge(1);
    switch (expr.kind) {
      case Expr::Kind::kLiteral:
        return static_cast<const LiteralExpr&>(expr).value;
      case Expr::Kind::kName: {
        const std::string& name = static_cast<const NameExpr&>(expr).name;
        if (const Value* found = scope->find(name)) return *found;
        return find_global(name);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        const auto& node = static_cast<const SequenceExpr&>(expr);
        std::vector<Value> items;
        items.reserve(node.items.size());
        for (const ExprPtr& item : node.items) items.push_back(eval(*item, scope));
        return Value::list(std::move(items));
      }
      case Expr::Kind::kDict: {
        const auto& node = static_cast<const DictExpr&>(expr);
        DictData entries;
        for (const auto& [key_expr, value_expr] : node.entries) {
          const Value key = eval(*key_expr, scope);
          if (!key.is_string())
            throw JinjaError("dict keys must be strings, got a " + std::string(type_name(key)));
          entries.set(key.as_string(), eval(*value_expr, scope));
        }
        return Value::dict(std::move(entries.entries));
      }
      case Expr::Kind::kUnary:
        return eval_unary(static_cast<const UnaryExpr&>(expr), scope);
      case Expr::Kind::kBinary:
        return eval_binary(static_cast<const BinaryExpr&>(expr), scope);
      case Expr::Kind::kConditional: {
        const auto& node = static_cast<const ConditionalExpr&>(expr);
        if (truthy(eval(*node.condition, scope))) return eval(*node.then_value, scope);
        return node.else_value ? eval(*node.else_value, scope) : Value();
      }
      case Expr::Kind::kAttribute: {
        const auto& node = static_cast<const AttributeExpr&>(expr);
        const Value object = eval(*node.object, scope);
        return node.index ? get_item(object, Value::integer(*node.index)) : get_attribute(object, node.name);
      }
      case Expr::Kind::kItem: {
        const auto& node = static_cast<const ItemExpr&>(expr);
        const Value object = eval(*node.object, scope);
        return get_item(object, eval(*node.key, scope));
      }
      case Expr::Kind::kSlice: {
        const auto& node = static_cast<const SliceExpr&>(expr);
        const Value object = eval(*node.object, scope);
        const Value start = node.start ? eval(*node.start, scope) : Value();
        const Value stop = node.stop ? eval(*node.stop, scope) : Value();
        const Value step = node.step ? eval(*node.step, scope) : Value();
        return slice_value(object, start, stop, step, context_);
      }
      case Expr::Kind::kCall:
        return eval_call(static_cast<const CallExpr&>(expr), scope);
      case Expr::Kind::kFilter: {
        const auto& node = static_cast<const FilterExpr&>(expr);
        return apply_filter_call(node.call, eval(*node.operand, scope), scope);
      }
      case Expr::Kind::kTest: {
        const auto& node = static_cast<const TestExpr&>(expr);
        const Value operand = eval(*node.operand, scope);
        return Value::boolean(apply_test(node.test, operand, eval_args(node.args, scope)) != node.negated);
      }
    }
    return Value();
  }

  Value eval_unary(const UnaryExpr& node, const ScopePtr& scope) {
    const Value operand = eval(*node.operand, scope);
    if (node.op == UnaryOp::kNot) return Value::boolean(!truthy(operand));
    if (operand.is_float())
      return Value::floating(node.op == UnaryOp::kNegate ? -operand.as_float() : operand.as_float());
    if (operand.is_int() || operand.is_bool()) {
      const int64_t i = as_integer(operand);
      if (node.op == UnaryOp::kPlus) return Value::integer(i);
      if (i == INT64_MIN) return Value::floating(-static_cast<double>(i));
      return Value::integer(-i);
    }
    throw JinjaError(std::string("bad operand type for unary ") + (node.op == UnaryOp::kNegate ? "-" : "+") +
                     ": " + std::string(type_name(operand)));
  }

  // Membership as the reference evaluates it (Python for the cases it raises on).
  static bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
      case Value::Kind::kUndefined:
        return false;  // `x in undefined` is false in the reference
      case Value::Kind::kList:
        for (const Value& v : container.as_list()) {
          if (strict_equal(item, v)) return true;
        }
        return false;
      case Value::Kind::kString:
        if (!item.is_string()) {
          throw JinjaError("'in <string>' needs a string on the left, not a " + std::string(type_name(item)));
        }
        return container.as_string().find(item.as_string()) != std::string::npos;
      case Value::Kind::kDict:
        return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
      default:
        throw JinjaError("cannot test membership in a " + std::string(type_name(container)));
    }
  }

  // One side of `~`: none as Python's "None", undefined as "", the rest as {{ }} prints it.
  static void append_concat_piece(std::string& out, const Value& v) {
    if (v.is_none()) {
      out += "None";
    } else {
      append_display(out, v);
    }
  }

  Value eval_binary(const BinaryExpr& node, const ScopePtr& scope) {
    Value left = eval(*node.left, scope);
    if (node.op == BinaryOp::kAnd) return truthy(left) ? eval(*node.right, scope) : left;
    if (node.op == BinaryOp::kOr) return truthy(left) ? left : eval(*node.right, scope);
    const Value right = eval(*node.right, scope);
    switch (node.op) {
      case BinaryOp::kEqual:
        return Value::boolean(loose_equal(left, right));
      case BinaryOp::kNotEqual:
        return Value::boolean(!loose_equal(left, right));
      case BinaryOp::kIn:
        return Value::boolean(contains(right, left));
      case BinaryOp::kNotIn:
        return Value::boolean(!contains(right, left));
      case BinaryOp::kConcat: {
        std::string out;
        append_concat_piece(out, left);
        append_concat_piece(out, right);
        return context_.make_string(std::move(out));
      }
      case BinaryOp::kLess:
      case BinaryOp::kGreater:
      case BinaryOp::kLessEqual:
      case BinaryOp::kGreaterEqual: {
        if (left.is_none() || left.is_undefined() || right.is_none() || right.is_undefined()) {
          throw JinjaError("cannot compare " + std::string(type_name(left)) + " " + op_symbol(node.op) + " " +
                           std::string(type_name(right)));
        }
        const int c = compare_values(left, right);
        switch (node.op) {
          case BinaryOp::kLess:
            return Value::boolean(c < 0);
          case BinaryOp::kGreater:
            return Value::boolean(c > 0);
          case BinaryOp::kLessEqual:
            return Value::boolean(c <= 0);
          default:
            return Value::boolean(c >= 0);
        }
      }
      default:
        return arithmetic(node.op, left, right);
    }
  }

  Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
    if (op == BinaryOp::kAdd) {
      if (a.is_list() && b.is_list()) {
        std::vector<Value> items = a.as_list();
        items.insert(items.end(), b.as_list().begin(), b.as_list().end());
        context_.charge(static_cast<int64_t>(items.size()));
        return Value::list(std::move(items));
      }
      // The reference concatenates a string with a string, number or boolean.
      const bool a_text = a.is_string() || is_numeric_like(a);
      const bool b_text = b.is_string() || is_numeric_like(b);
      if ((a.is_string() || b.is_string()) && a_text && b_text) {
        std::string out;
        append_display(out, a);
        append_display(out, b);
        return context_.make_string(std::move(out));
      }
    }
    if (op == BinaryOp::kMultiply && ((a.is_string() && b.is_int()) || (a.is_int() && b.is_string()))) {
      const std::string& s = a.is_string() ? a.as_string() : b.as_string();
      const int64_t count = std::max<int64_t>(0, a.is_int() ? a.as_int() : b.as_int());
      if (count > 0 && s.size() > 0)
        context_.check_string_size(s.size() * static_cast<size_t>(std::min<int64_t>(count, INT32_MAX)));
      std::string out;
      for (int64_t i = 0; i < count && !s.empty(); ++i) out += s;
      return context_.make_string(std::move(out));
    }
    if (!is_numeric_like(a) || !is_numeric_like(b)) {
      throw JinjaError("unsupported operand types for " + op_symbol(op) + ": " + std::string(type_name(a)) +
                       " and " + std::string(type_name(b)));
    }
    const bool integers = !a.is_float() && !b.is_float();
    if (integers) {
      const int64_t x = as_integer(a);
      const int64_t y = as_integer(b);
      int64_t r = 0;
      switch (op) {
        case BinaryOp::kAdd:
          if (!__builtin_add_overflow(x, y, &r)) return Value::integer(r);
          break;
        case BinaryOp::kSubtract:
          if (!__builtin_sub_overflow(x, y, &r)) return Value::integer(r);
          break;
        case BinaryOp::kMultiply:
          if (!__builtin_mul_overflow(x, y, &r)) return Value::integer(r);
          break;
        case BinaryOp::kFloorDivide: {
          if (y == 0) throw JinjaError("integer division by zero");
          if (x == INT64_MIN && y == -1) break;
          int64_t q = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
          return Value::integer(q);
        }
        case BinaryOp::kModulo: {
          if (y == 0) throw JinjaError("integer modulo by zero");
          if (y == -1) return Value::integer(0);
          int64_t m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) m += y;
          return Value::integer(m);
        }
        case BinaryOp::kPower: {
          if (y < 0) break;  // a float result
          int64_t result = 1;
          int64_t base = x;
          bool overflow = false;
          for (int64_t e = y; e > 0 && !overflow; e >>= 1) {
            if ((e & 1) != 0) overflow = __builtin_mul_overflow(result, base, &result);
            if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
          }
          if (!overflow) return Value::integer(result);
          break;
        }
        default:
          break;
      }
    }
    // Floats (and integer results that overflow int64).
    const double x = as_double(a);
    const double y = as_double(b);
    double r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        r = x + y;
        break;
      case BinaryOp::kSubtract:
        r = x - y;
        break;
      case BinaryOp::kMultiply:
        r = x * y;
        break;
      case BinaryOp::kDivide:
        if (y == 0) throw JinjaError("division by zero");
        r = x / y;
        break;
      case BinaryOp::kFloorDivide:
        if (y == 0) throw JinjaError("float floor division by zero");
        r = std::floor(x / y);
        break;
      case BinaryOp::kModulo:
        if (y == 0) throw JinjaError("float modulo by zero");
        r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        break;
      case BinaryOp::kPower:
        if (x == 0 && y < 0) throw JinjaError("0.0 cannot be raised to a negative power");
        r = std::pow(x, y);
        if (!std::isfinite(r)) throw JinjaError("power result is not a finite real number");
        break;
      default:
        throw JinjaError("unsupported operator " + op_symbol(op));
    }
    return Value::floating(r);
  }

  const Program& program_;
  RenderContext& context_;
  int depth_ = 0;
  int call_depth_ = 0;
};

}  // namespace

std::string render_program(const Program& program,
                           const std::vector<std::pair<std::string, Value>>& variables,
                           const RenderOptions& options) {
  RenderContext context(options.limits, options.now);  // declared first: released last (see its destructor)
  auto globals = std::make_shared<Scope>(nullptr);
  for (const auto& [name, value] : variables) globals->set(name, value);
  std::string out;
  Interpreter(program, context).run(globals, out);
  return out;
}

}  // namespace helium::jinja
