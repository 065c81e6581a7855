// chat/jinja_ast.h — the syntax tree of a parsed chat template: expressions and statements, each with
// the byte offset of its source so that errors can name line:column.
// Owns: node types only. Must not: parse or evaluate (jinja_parser / jinja_interpreter do).
//
// Nodes are immutable once parsed, so one parsed template renders from many threads at once. Kinds are
// plain enums and the evaluator switches on them (no virtual dispatch on the hot path).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_builtins.h"
#include "chat/jinja_value.h"

namespace helium::jinja {

enum class UnaryOp : uint8_t { kNot, kNegate, kPlus };
enum class BinaryOp : uint8_t {
  kAnd,
  kOr,  // short-circuit, return an operand (Python)
  kEqual,
  kNotEqual,
  kLess,
  kGreater,
  kLessEqual,
  kGreaterEqual,
  kIn,
  kNotIn,
  kAdd,
  kSubtract,
  kConcat,
  kMultiply,
  kDivide,
  kFloorDivide,
  kModulo,
  kPower,
};

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,
    kName,
    kList,
    kTuple,
    kDict,
    kUnary,
    kBinary,
    kConditional,
    kAttribute,
    kItem,
    kSlice,
    kCall,
    kFilter,
    kTest,
  };
  Expr(Kind k, size_t o) : kind(k), offset(o) {}
  virtual ~Expr() = default;
  Kind kind;
  size_t offset;
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
  LiteralExpr(size_t o, Value v) : Expr(Kind::kLiteral, o), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(size_t o, std::string n) : Expr(Kind::kName, o), name(std::move(n)) {}
  std::string name;
};

struct SequenceExpr : Expr {  // kList or kTuple
  SequenceExpr(Kind k, size_t o) : Expr(k, o) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(size_t o) : Expr(Kind::kDict, o) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

struct UnaryExpr : Expr {
  UnaryExpr(size_t o, UnaryOp p, ExprPtr e) : Expr(Kind::kUnary, o), op(p), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};

struct BinaryExpr : Expr {
  BinaryExpr(size_t o, BinaryOp p, ExprPtr l, ExprPtr r)
      : Expr(Kind::kBinary, o), op(p), left(std::move(l)), right(std::move(r)) {}
  BinaryOp op;
  ExprPtr left;
  ExprPtr right;
};

// `a if condition else b`; without `else` the value is undefined when the condition is false.
struct ConditionalExpr : Expr {
  explicit ConditionalExpr(size_t o) : Expr(Kind::kConditional, o) {}
  ExprPtr condition;
  ExprPtr then_value;
  ExprPtr else_value;  // may be null
};

// `object.name`, or `object.0` (index set).
struct AttributeExpr : Expr {
  AttributeExpr(size_t o, ExprPtr obj) : Expr(Kind::kAttribute, o), object(std::move(obj)) {}
  ExprPtr object;
  std::string name;
  std::optional<int64_t> index;
};

struct ItemExpr : Expr {  // object[key]
  ItemExpr(size_t o, ExprPtr obj, ExprPtr k)
      : Expr(Kind::kItem, o), object(std::move(obj)), key(std::move(k)) {}
  ExprPtr object;
  ExprPtr key;
};

struct SliceExpr : Expr {  // object[start:stop:step], each part optional
  SliceExpr(size_t o, ExprPtr obj) : Expr(Kind::kSlice, o), object(std::move(obj)) {}
  ExprPtr object;
  ExprPtr start;
  ExprPtr stop;
  ExprPtr step;
};

struct Argument {
  enum class Kind : uint8_t { kPositional, kKeyword, kSpread, kKeywordSpread };  // x, name=x, *x, **x
  Kind kind;
  std::string name;  // kKeyword only
  ExprPtr value;
};

struct CallExpr : Expr {
  CallExpr(size_t o, ExprPtr c) : Expr(Kind::kCall, o), callee(std::move(c)) {}
  ExprPtr callee;
  std::vector<Argument> args;
};

// One `| name(args)` step, resolved to a builtin filter when parsed.
struct FilterCall {
  Filter filter;
  std::string name;
  std::vector<Argument> args;
  size_t offset;
};

struct FilterExpr : Expr {
  FilterExpr(size_t o, ExprPtr e, FilterCall f)
      : Expr(Kind::kFilter, o), operand(std::move(e)), call(std::move(f)) {}
  ExprPtr operand;
  FilterCall call;
};

struct TestExpr : Expr {  // operand is [not] name(args)
  TestExpr(size_t o, ExprPtr e) : Expr(Kind::kTest, o), operand(std::move(e)) {}
  ExprPtr operand;
  Test test;
  std::string name;
  bool negated = false;
  std::vector<Argument> args;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind : uint8_t {
    kText,
    kOutput,
    kIf,
    kFor,
    kSet,
    kMacro,
    kCallBlock,
    kFilterBlock,
    kBreak,
    kContinue
  };
  Stmt(Kind k, size_t o) : kind(k), offset(o) {}
  virtual ~Stmt() = default;
  Kind kind;
  size_t offset;
};

struct TextStmt : Stmt {
  TextStmt(size_t o, std::string t) : Stmt(Kind::kText, o), text(std::move(t)) {}
  std::string text;
};

struct OutputStmt : Stmt {  // {{ value }}
  OutputStmt(size_t o, ExprPtr v) : Stmt(Kind::kOutput, o), value(std::move(v)) {}
  ExprPtr value;
};

struct IfStmt : Stmt {  // if / elif... / else
  explicit IfStmt(size_t o) : Stmt(Kind::kIf, o) {}
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(size_t o) : Stmt(Kind::kFor, o) {}
  std::vector<std::string> targets;  // one name, or several to unpack each item into
  bool unpack = false;
  ExprPtr iterable;
  ExprPtr condition;  // `for x in xs if condition`; may be null
  Body body;
  Body else_body;          // rendered when no item passed the condition
  bool uses_loop = false;  // the body names `loop`; when it does not, no loop object is built
};

struct SetStmt : Stmt {
  explicit SetStmt(size_t o) : Stmt(Kind::kSet, o) {}
  std::vector<std::string> names;  // `set a = ...` or `set a, b = ...` (unpack)
  bool unpack = false;
  ExprPtr namespace_object;  // `set ns.attribute = ...` when set (names empty)
  std::string attribute;
  ExprPtr value;  // `= value`, or null for a block set whose body is rendered
  Body body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

// Shared by macros and call blocks (a call block's body is an anonymous macro named `caller`).
struct MacroDefinition {
  std::string name;
  std::vector<MacroParam> params;
  Body body;
  bool takes_varargs = false;  // the body reads `varargs`: extra positional arguments are allowed
  bool takes_kwargs = false;   // the body reads `kwargs`: unknown keyword arguments are allowed
};

struct MacroStmt : Stmt {
  explicit MacroStmt(size_t o) : Stmt(Kind::kMacro, o) {}
  MacroDefinition macro;
};

struct CallBlockStmt : Stmt {  // {% call(params) macro(args) %}body{% endcall %}
  explicit CallBlockStmt(size_t o) : Stmt(Kind::kCallBlock, o) {}
  std::unique_ptr<CallExpr> call;
  MacroDefinition caller;
};

struct FilterBlockStmt : Stmt {  // {% filter a | b(args) %}body{% endfilter %}
  explicit FilterBlockStmt(size_t o) : Stmt(Kind::kFilterBlock, o) {}
  std::vector<FilterCall> filters;
  Body body;
};

struct ControlStmt : Stmt {  // break / continue
  ControlStmt(Kind k, size_t o) : Stmt(k, o) {}
};

struct Program {
  std::string source;  // kept for error locations
  Body body;
};

}  // namespace helium::jinja
