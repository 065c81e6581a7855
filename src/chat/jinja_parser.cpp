// chat/jinja_parser.cpp — see jinja_parser.h. A recursive-descent parser: one function per precedence
// level, each returning a node; errors name what was expected and what was found.
#include "chat/jinja_parser.h"

#include <charconv>
#include <initializer_list>
#include <utility>
#include <vector>

#include "chat/jinja_lexer.h"

namespace helium::jinja {

namespace {

std::string_view describe(TokenType type) {
  switch (type) {
    case TokenType::kText:
      return "text";
    case TokenType::kComment:
      return "a comment";
    case TokenType::kOpenStatement:
      return "'{%'";
    case TokenType::kCloseStatement:
      return "'%}'";
    case TokenType::kOpenExpression:
      return "'{{'";
    case TokenType::kCloseExpression:
      return "'}}'";
    case TokenType::kNumber:
      return "a number";
    case TokenType::kString:
      return "a string";
    case TokenType::kIdentifier:
      return "a name";
    case TokenType::kEquals:
      return "'='";
    case TokenType::kOpenParen:
      return "'('";
    case TokenType::kCloseParen:
      return "')'";
    case TokenType::kOpenBracket:
      return "'['";
    case TokenType::kCloseBracket:
      return "']'";
    case TokenType::kOpenBrace:
      return "'{'";
    case TokenType::kCloseBrace:
      return "'}'";
    case TokenType::kComma:
      return "','";
    case TokenType::kDot:
      return "'.'";
    case TokenType::kColon:
      return "':'";
    case TokenType::kPipe:
      return "'|'";
    case TokenType::kAdditive:
    case TokenType::kMultiplicative:
    case TokenType::kPower:
    case TokenType::kComparison:
    case TokenType::kUnarySign:
      return "an operator";
  }
  return "a token";
}

// Names that end an expression rather than start a test argument (`x is defined and y`).
bool is_keyword(std::string_view name) {
  for (std::string_view k : {"and", "or", "not", "in", "is", "if", "else", "for", "recursive"}) {
    if (name == k) return true;
  }
  return false;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, size_t source_size)
      : tokens_(std::move(tokens)), end_offset_(source_size) {}

  Body parse_template() {
    Body body;
    while (!at_end()) {
      if (is_statement_start() && !is_known_statement_opener()) fail_unexpected_statement();
      if (StmtPtr node = parse_node()) body.push_back(std::move(node));
    }
    return body;
  }

 private:
  // ----- token access ----------------------------------------------------------------------------

  bool at_end() const { return pos_ >= tokens_.size(); }
  const Token* peek(size_t ahead = 0) const {
    return pos_ + ahead < tokens_.size() ? &tokens_[pos_ + ahead] : nullptr;
  }
  bool at(TokenType type, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t != nullptr && t->type == type;
  }
  bool at_value(TokenType type, std::string_view value, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t != nullptr && t->type == type && t->value == value;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return at_value(TokenType::kIdentifier, name, ahead);
  }
  size_t offset() const { return at_end() ? end_offset_ : tokens_[pos_].offset; }

  [[noreturn]] void fail(const std::string& message, size_t at_offset) const {
    throw JinjaError(message, at_offset);
  }
  [[noreturn]] void fail_expected(std::string_view expected) const {
    if (at_end()) fail("expected " + std::string(expected) + ", found the end of the template", end_offset_);
    const Token& t = tokens_[pos_];
    std::string found(describe(t.type));
    if (t.type == TokenType::kIdentifier || t.type == TokenType::kNumber || t.type >= TokenType::kAdditive) {
      found += " '" + t.value + "'";
    }
    fail("expected " + std::string(expected) + ", found " + found, t.offset);
  }

  const Token& expect(TokenType type, std::string_view what) {
    if (!at(type)) fail_expected(what);
    return tokens_[pos_++];
  }
  void expect_name(std::string_view name) {
    if (!at_name(name)) fail_expected("'" + std::string(name) + "'");
    ++pos_;
  }
  std::string expect_identifier(std::string_view what) { return expect(TokenType::kIdentifier, what).value; }

  // RAII bound on recursion.
  class DepthGuard {
   public:
    DepthGuard(Parser& p, size_t at_offset) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) {
        p_.fail("template nested deeper than " + std::to_string(kMaxParseDepth) + " levels", at_offset);
      }
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& p_;
  };

  // ----- statements ------------------------------------------------------------------------------

  bool is_statement_start() const { return at(TokenType::kOpenStatement) && at(TokenType::kIdentifier, 1); }
  bool at_statement(std::initializer_list<std::string_view> names) const {
    if (!is_statement_start()) return false;
    for (std::string_view name : names) {
      if (tokens_[pos_ + 1].value == name) return true;
    }
    return false;
  }
  bool is_known_statement_opener() const {
    static constexpr std::string_view kOpeners[] = {"if",   "for",    "set",   "macro",
                                                    "call", "filter", "break", "continue"};
    for (std::string_view name : kOpeners) {
      if (tokens_[pos_ + 1].value == name) return true;
    }
    return false;
  }
  [[noreturn]] void fail_unexpected_statement() const {
    const Token& name = tokens_[pos_ + 1];
    static constexpr std::string_view kEnders[] = {"endif",  "elif",     "else",    "endfor",
                                                   "endset", "endmacro", "endcall", "endfilter"};
    for (std::string_view ender : kEnders) {
      if (name.value == ender)
        fail("unexpected '{% " + name.value + " %}' with no block open to close", name.offset);
    }
    fail("unknown or unsupported statement '" + name.value + "'", name.offset);
  }

  // Parses nodes until one of `terminators` opens a statement; `opener` names the block for errors.
  Body parse_body(std::initializer_list<std::string_view> terminators, std::string_view opener,
                  size_t opener_offset) {
    Body body;
    while (true) {
      if (at_end()) {
        std::string names;
        for (std::string_view t : terminators)
          names += (names.empty() ? "" : " or ") + std::string("{% ") + std::string(t) + " %}";
        fail("'" + std::string(opener) + "' block is never closed (expected " + names + ")", opener_offset);
      }
      if (at_statement(terminators)) return body;
      if (is_statement_start() && !is_known_statement_opener()) fail_unexpected_statement();
      if (StmtPtr node = parse_node()) body.push_back(std::move(node));
    }
  }

  // {% name %} that closes a block, e.g. {% endif %}.
  void expect_end_statement(std::string_view name) {
    expect(TokenType::kOpenStatement, "'{%'");
    expect_name(name);
    expect(TokenType::kCloseStatement, "'%}' after '" + std::string(name) + "'");
  }

  StmtPtr parse_node() {
    const Token& token = tokens_[pos_];
    switch (token.type) {
      case TokenType::kText:
        ++pos_;
        return std::make_unique<TextStmt>(token.offset, token.value);
      case TokenType::kComment:
        ++pos_;
        return nullptr;
      case TokenType::kOpenExpression: {
        ++pos_;
        ExprPtr value = parse_expression();
        expect(TokenType::kCloseExpression, "'}}'");
        return std::make_unique<OutputStmt>(token.offset, std::move(value));
      }
      case TokenType::kOpenStatement:
        return parse_statement();
      default:
        fail_expected("text, '{{' or '{%'");
    }
  }

  StmtPtr parse_statement() {
    const size_t start = offset();
    DepthGuard guard(*this, start);
    expect(TokenType::kOpenStatement, "'{%'");
    if (!at(TokenType::kIdentifier)) fail_expected("a statement name");
    const std::string name = tokens_[pos_++].value;
    if (name == "if") return parse_if(start);
    if (name == "for") return parse_for(start);
    if (name == "set") return parse_set(start);
    if (name == "macro") return parse_macro(start);
    if (name == "call") return parse_call_block(start);
    if (name == "filter") return parse_filter_block(start);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail("'" + name + "' outside a for loop", start);
      expect(TokenType::kCloseStatement, "'%}' after '" + name + "'");
      return std::make_unique<ControlStmt>(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue,
                                           start);
    }
    fail("unknown or unsupported statement '" + name + "'", start);
  }

  StmtPtr parse_if(size_t start) {
    auto node = std::make_unique<IfStmt>(start);
    ExprPtr condition = parse_expression();
    expect(TokenType::kCloseStatement, "'%}' after the if condition");
    Body body = parse_body({"elif", "else", "endif"}, "if", start);
    node->branches.emplace_back(std::move(condition), std::move(body));
    while (at_statement({"elif"})) {
      pos_ += 2;
      ExprPtr elif_condition = parse_expression();
      expect(TokenType::kCloseStatement, "'%}' after the elif condition");
      Body elif_body = parse_body({"elif", "else", "endif"}, "if", start);
      node->branches.emplace_back(std::move(elif_condition), std::move(elif_body));
    }
    if (at_statement({"else"})) {
      pos_ += 2;
      expect(TokenType::kCloseStatement, "'%}' after 'else'");
      node->else_body = parse_body({"endif"}, "if", start);
    }
    expect_end_statement("endif");
    return node;
  }

  // Loop targets: `x`, `a, b` or `(a, b)`.
  void parse_targets(std::vector<std::string>& names, bool& unpack) {
    const bool parenthesized = at(TokenType::kOpenParen);
    if (parenthesized) ++pos_;
    names.push_back(expect_identifier("a loop variable name"));
    while (at(TokenType::kComma)) {
      ++pos_;
      if (!at(TokenType::kIdentifier)) break;  // trailing comma
      names.push_back(expect_identifier("a variable name"));
    }
    unpack = names.size() > 1 || parenthesized;
    if (parenthesized) expect(TokenType::kCloseParen, "')' after the loop variables");
  }

  StmtPtr parse_for(size_t start) {
    auto node = std::make_unique<ForStmt>(start);
    parse_targets(node->targets, node->unpack);
    expect_name("in");
    node->iterable = parse_or();
    if (at_name("if")) {
      ++pos_;
      node->condition = parse_expression();
    }
    if (at_name("recursive")) fail("recursive loops are not supported", offset());
    expect(TokenType::kCloseStatement, "'%}' after the for header");
    ++loop_depth_;
    open_loops_.push_back(node.get());
    node->body = parse_body({"else", "endfor"}, "for", start);
    open_loops_.pop_back();
    --loop_depth_;
    if (at_statement({"else"})) {
      pos_ += 2;
      expect(TokenType::kCloseStatement, "'%}' after 'else'");
      node->else_body = parse_body({"endfor"}, "for", start);
    }
    expect_end_statement("endfor");
    return node;
  }

  StmtPtr parse_set(size_t start) {
    auto node = std::make_unique<SetStmt>(start);
    const size_t target_offset = offset();
    std::string first = expect_identifier("a variable name after 'set'");
    if (at(TokenType::kDot)) {
      ++pos_;
      node->namespace_object = std::make_unique<NameExpr>(target_offset, std::move(first));
      node->attribute = expect_identifier("an attribute name after '.'");
    } else {
      node->names.push_back(std::move(first));
      while (at(TokenType::kComma)) {
        ++pos_;
        node->names.push_back(expect_identifier("a variable name"));
      }
      node->unpack = node->names.size() > 1;
    }
    if (at(TokenType::kEquals)) {
      ++pos_;
      node->value = parse_tuple_or_expression();
      expect(TokenType::kCloseStatement, "'%}' after the set value");
      return node;
    }
    expect(TokenType::kCloseStatement, "'=' or '%}' after the set target");
    node->body = parse_captured_body("endset", "set", start);
    expect_end_statement("endset");
    return node;
  }

  // Macro and caller parameters: `(a, b=default, ...)`.
  void parse_params(std::vector<MacroParam>& params) {
    expect(TokenType::kOpenParen, "'(' before the parameters");
    bool seen_default = false;
    while (!at(TokenType::kCloseParen)) {
      const size_t param_offset = offset();
      MacroParam param;
      param.name = expect_identifier("a parameter name");
      for (const MacroParam& p : params) {
        if (p.name == param.name) fail("duplicate parameter '" + param.name + "'", param_offset);
      }
      if (at(TokenType::kEquals)) {
        ++pos_;
        param.default_value = parse_expression();
        seen_default = true;
      } else if (seen_default) {
        fail("parameter '" + param.name + "' without a default follows one with a default", param_offset);
      }
      params.push_back(std::move(param));
      if (!at(TokenType::kComma)) break;
      ++pos_;
    }
    expect(TokenType::kCloseParen, "')' after the parameters");
  }

  // A body rendered into a value (block set, filter block): break/continue cannot leave it.
  Body parse_captured_body(std::string_view end, std::string_view opener, size_t start) {
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    Body body = parse_body({end}, opener, start);
    loop_depth_ = saved_loop_depth;
    return body;
  }

  // Parses a macro-like body and records whether it reads `varargs` / `kwargs`.
  void parse_macro_body(MacroDefinition& macro, std::string_view end, std::string_view opener, size_t start) {
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    special_name_uses_.push_back(0);
    macro.body = parse_body({end}, opener, start);
    const unsigned uses = special_name_uses_.back();
    special_name_uses_.pop_back();
    loop_depth_ = saved_loop_depth;
    macro.takes_varargs = (uses & kUsesVarargs) != 0;
    macro.takes_kwargs = (uses & kUsesKwargs) != 0;
    expect_end_statement(end);
  }

  StmtPtr parse_macro(size_t start) {
    auto node = std::make_unique<MacroStmt>(start);
    node->macro.name = expect_identifier("a macro name");
    parse_params(node->macro.params);
    expect(TokenType::kCloseStatement, "'%}' after the macro parameters");
    parse_macro_body(node->macro, "endmacro", "macro", start);
    return node;
  }

  StmtPtr parse_call_block(size_t start) {
    auto node = std::make_unique<CallBlockStmt>(start);
    node->caller.name = "caller";
    if (at(TokenType::kOpenParen)) parse_params(node->caller.params);
    ExprPtr call = parse_unary();
    if (call->kind != Expr::Kind::kCall) fail("expected a macro call after 'call'", call->offset);
    node->call.reset(static_cast<CallExpr*>(call.release()));
    expect(TokenType::kCloseStatement, "'%}' after the call");
    parse_macro_body(node->caller, "endcall", "call", start);
    return node;
  }

  StmtPtr parse_filter_block(size_t start) {
    auto node = std::make_unique<FilterBlockStmt>(start);
    node->filters.push_back(parse_filter_call());
    while (at(TokenType::kPipe)) {
      ++pos_;
      node->filters.push_back(parse_filter_call());
    }
    expect(TokenType::kCloseStatement, "'%}' after the filter");
    node->body = parse_captured_body("endfilter", "filter", start);
    expect_end_statement("endfilter");
    return node;
  }

  // ----- expressions -----------------------------------------------------------------------------

  // `a, b` (a tuple) or a single expression, as `set x = ...` takes it.
  ExprPtr parse_tuple_or_expression() {
    const size_t start = offset();
    ExprPtr first = parse_expression();
    if (!at(TokenType::kComma)) return first;
    auto tuple = std::make_unique<SequenceExpr>(Expr::Kind::kTuple, start);
    tuple->items.push_back(std::move(first));
    while (at(TokenType::kComma)) {
      ++pos_;
      if (at(TokenType::kCloseStatement) || at(TokenType::kCloseParen)) break;
      tuple->items.push_back(parse_expression());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this, offset());
    ExprPtr value = parse_or();
    while (at_name("if")) {
      const size_t if_offset = offset();
      ++pos_;
      auto conditional = std::make_unique<ConditionalExpr>(if_offset);
      conditional->then_value = std::move(value);
      conditional->condition = parse_or();
      if (at_name("else")) {
        ++pos_;
        conditional->else_value = parse_expression();
      }
      value = std::move(conditional);
    }
    return value;
  }

  ExprPtr binary(size_t at_offset, BinaryOp op, ExprPtr left, ExprPtr right) {
    return std::make_unique<BinaryExpr>(at_offset, op, std::move(left), std::move(right));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const size_t op_offset = offset();
      ++pos_;
      left = binary(op_offset, BinaryOp::kOr, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const size_t op_offset = offset();
      ++pos_;
      left = binary(op_offset, BinaryOp::kAnd, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not") && !at_name("in", 1)) {
      const size_t op_offset = offset();
      ++pos_;
      DepthGuard guard(*this, op_offset);
      return std::make_unique<UnaryExpr>(op_offset, UnaryOp::kNot, parse_not());
    }
    return parse_comparison();
  }

  ExprPtr parse_comparison() {
    ExprPtr left = parse_additive();
    while (true) {
      const size_t op_offset = offset();
      BinaryOp op;
      if (at_name("not") && at_name("in", 1)) {
        pos_ += 2;
        op = BinaryOp::kNotIn;
      } else if (at_name("in")) {
        ++pos_;
        op = BinaryOp::kIn;
      } else if (at(TokenType::kComparison)) {
        const std::string& v = tokens_[pos_++].value;
        op = v == "=="   ? BinaryOp::kEqual
             : v == "!=" ? BinaryOp::kNotEqual
             : v == "<"  ? BinaryOp::kLess
             : v == ">"  ? BinaryOp::kGreater
             : v == "<=" ? BinaryOp::kLessEqual
                         : BinaryOp::kGreaterEqual;
      } else {
        return left;
      }
      left = binary(op_offset, op, std::move(left), parse_additive());
    }
  }

  ExprPtr parse_additive() {
    ExprPtr left = parse_concat();
    while (at_value(TokenType::kAdditive, "+") || at_value(TokenType::kAdditive, "-")) {
      const size_t op_offset = offset();
      const BinaryOp op = tokens_[pos_++].value == "+" ? BinaryOp::kAdd : BinaryOp::kSubtract;
      left = binary(op_offset, op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_multiplicative();
    while (at_value(TokenType::kAdditive, "~")) {
      const size_t op_offset = offset();
      ++pos_;
      left = binary(op_offset, BinaryOp::kConcat, std::move(left), parse_multiplicative());
    }
    return left;
  }

  ExprPtr parse_multiplicative() {
    ExprPtr left = parse_power();
    while (at(TokenType::kMultiplicative)) {
      const size_t op_offset = offset();
      const std::string& v = tokens_[pos_++].value;
      const BinaryOp op = v == "*"    ? BinaryOp::kMultiply
                          : v == "/"  ? BinaryOp::kDivide
                          : v == "//" ? BinaryOp::kFloorDivide
                                      : BinaryOp::kModulo;
      left = binary(op_offset, op, std::move(left), parse_power());
    }
    return left;
  }

  ExprPtr parse_power() {
    ExprPtr left = parse_unary();
    while (at(TokenType::kPower)) {  // left-associative in Jinja
      const size_t op_offset = offset();
      ++pos_;
      left = binary(op_offset, BinaryOp::kPower, std::move(left), parse_unary());
    }
    return left;
  }

  // A sign applies to its operand before the filters and tests that follow: `-x | abs` is `(-x) | abs`.
  ExprPtr parse_unary(bool with_filters = true) {
    const size_t start = offset();
    DepthGuard guard(*this, start);
    ExprPtr node;
    if (at(TokenType::kUnarySign) || at_value(TokenType::kAdditive, "-") ||
        at_value(TokenType::kAdditive, "+")) {
      const UnaryOp op = tokens_[pos_++].value == "-" ? UnaryOp::kNegate : UnaryOp::kPlus;
      node = std::make_unique<UnaryExpr>(start, op, parse_unary(false));
    } else {
      node = parse_postfix(parse_primary());
    }
    return with_filters ? parse_filters_and_tests(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    if (at_end()) fail_expected("an expression");
    const Token& token = tokens_[pos_];
    switch (token.type) {
      case TokenType::kNumber: {
        ++pos_;
        return std::make_unique<LiteralExpr>(token.offset, parse_number(token));
      }
      case TokenType::kString: {
        std::string value = tokens_[pos_++].value;
        while (at(TokenType::kString)) value += tokens_[pos_++].value;  // "a" "b" is "ab"
        return std::make_unique<LiteralExpr>(token.offset, Value::string(std::move(value)));
      }
      case TokenType::kIdentifier: {
        ++pos_;
        const std::string& name = token.value;
        if (name == "true" || name == "True")
          return std::make_unique<LiteralExpr>(token.offset, Value::boolean(true));
        if (name == "false" || name == "False")
          return std::make_unique<LiteralExpr>(token.offset, Value::boolean(false));
        if (name == "none" || name == "None")
          return std::make_unique<LiteralExpr>(token.offset, Value::none());
        if (name == "loop") {
          // Conservatively every enclosing loop: an inner loop's header still sees the outer `loop`.
          for (ForStmt* open : open_loops_) open->uses_loop = true;
        }
        if (!special_name_uses_.empty()) {
          if (name == "varargs") special_name_uses_.back() |= kUsesVarargs;
          if (name == "kwargs") special_name_uses_.back() |= kUsesKwargs;
        }
        return std::make_unique<NameExpr>(token.offset, name);
      }
      case TokenType::kOpenParen: {
        ++pos_;
        if (at(TokenType::kCloseParen)) {
          ++pos_;
          return std::make_unique<SequenceExpr>(Expr::Kind::kTuple, token.offset);
        }
        ExprPtr inner = parse_expression();
        if (at(TokenType::kComma)) {
          auto tuple = std::make_unique<SequenceExpr>(Expr::Kind::kTuple, token.offset);
          tuple->items.push_back(std::move(inner));
          while (at(TokenType::kComma)) {
            ++pos_;
            if (at(TokenType::kCloseParen)) break;
            tuple->items.push_back(parse_expression());
          }
          inner = std::move(tuple);
        }
        expect(TokenType::kCloseParen, "')'");
        return inner;
      }
      case TokenType::kOpenBracket: {
        ++pos_;
        auto list = std::make_unique<SequenceExpr>(Expr::Kind::kList, token.offset);
        while (!at(TokenType::kCloseBracket)) {
          list->items.push_back(parse_expression());
          if (!at(TokenType::kComma)) break;
          ++pos_;
        }
        expect(TokenType::kCloseBracket, "',' or ']' in the list");
        return list;
      }
      case TokenType::kOpenBrace: {
        ++pos_;
        auto dict = std::make_unique<DictExpr>(token.offset);
        while (!at(TokenType::kCloseBrace)) {
          ExprPtr key = parse_expression();
          expect(TokenType::kColon, "':' after the dict key");
          ExprPtr value = parse_expression();
          dict->entries.emplace_back(std::move(key), std::move(value));
          if (!at(TokenType::kComma)) break;
          ++pos_;
        }
        expect(TokenType::kCloseBrace, "',' or '}' in the dict");
        return dict;
      }
      default:
        fail_expected("an expression");
    }
  }

  Value parse_number(const Token& token) const {
    const std::string& text = token.value;
    const char* begin = text.data();
    const char* end = text.data() + text.size();
    if (text.find('.') != std::string::npos) {
      double value = 0;
      std::from_chars(begin, end, value);
      return Value::floating(value);
    }
    if (*begin == '+') ++begin;
    int64_t value = 0;
    const auto [stop, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || stop != end) fail("integer literal " + text + " is out of range", token.offset);
    return Value::integer(value);
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const size_t op_offset = offset();
      if (at(TokenType::kDot)) {
        ++pos_;
        auto attribute = std::make_unique<AttributeExpr>(op_offset, std::move(node));
        if (at(TokenType::kIdentifier)) {
          attribute->name = tokens_[pos_++].value;
        } else if (at(TokenType::kNumber) &&
                   tokens_[pos_].value.find_first_not_of("0123456789") == std::string::npos) {
          attribute->index = parse_number(tokens_[pos_++]).as_int();
        } else {
          fail_expected("an attribute name after '.'");
        }
        node = std::move(attribute);
      } else if (at(TokenType::kOpenBracket)) {
        ++pos_;
        node = parse_subscript(op_offset, std::move(node));
      } else if (at(TokenType::kOpenParen)) {
        auto call = std::make_unique<CallExpr>(op_offset, std::move(node));
        call->args = parse_call_args();
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  // After '[': an index `[i]` or a slice `[a:b:c]` (any part may be empty).
  ExprPtr parse_subscript(size_t start, ExprPtr object) {
    ExprPtr parts[3];
    int colons = 0;
    if (!at(TokenType::kColon)) parts[0] = parse_expression();
    while (at(TokenType::kColon) && colons < 2) {
      ++pos_;
      ++colons;
      if (!at(TokenType::kColon) && !at(TokenType::kCloseBracket)) parts[colons] = parse_expression();
    }
    expect(TokenType::kCloseBracket, "']'");
    if (colons == 0) {
      if (!parts[0]) fail("expected an index inside '[]'", start);
      return std::make_unique<ItemExpr>(start, std::move(object), std::move(parts[0]));
    }
    auto slice = std::make_unique<SliceExpr>(start, std::move(object));
    slice->start = std::move(parts[0]);
    slice->stop = std::move(parts[1]);
    slice->step = std::move(parts[2]);
    return slice;
  }

  std::vector<Argument> parse_call_args() {
    expect(TokenType::kOpenParen, "'('");
    std::vector<Argument> args;
    bool seen_keyword = false;
    while (!at(TokenType::kCloseParen)) {
      const size_t arg_offset = offset();
      Argument arg;
      if (at(TokenType::kPower)) {
        ++pos_;
        arg.kind = Argument::Kind::kKeywordSpread;
        seen_keyword = true;
      } else if (at_value(TokenType::kMultiplicative, "*")) {
        ++pos_;
        arg.kind = Argument::Kind::kSpread;
      } else if (at(TokenType::kIdentifier) && at(TokenType::kEquals, 1)) {
        arg.kind = Argument::Kind::kKeyword;
        arg.name = tokens_[pos_].value;
        pos_ += 2;
        for (const Argument& other : args) {
          if (other.kind == Argument::Kind::kKeyword && other.name == arg.name) {
            fail("keyword argument '" + arg.name + "' given twice", arg_offset);
          }
        }
        seen_keyword = true;
      } else {
        arg.kind = Argument::Kind::kPositional;
        if (seen_keyword) fail("positional argument follows keyword argument", arg_offset);
      }
      arg.value = parse_expression();
      args.push_back(std::move(arg));
      if (!at(TokenType::kComma)) break;
      ++pos_;
    }
    expect(TokenType::kCloseParen, "',' or ')' in the argument list");
    return args;
  }

  FilterCall parse_filter_call() {
    FilterCall call;
    call.offset = offset();
    call.name = expect_identifier("a filter name");
    const std::optional<Filter> filter = find_filter(call.name);
    if (!filter) fail("unknown filter '" + call.name + "'", call.offset);
    call.filter = *filter;
    if (at(TokenType::kOpenParen)) call.args = parse_call_args();
    return call;
  }

  // `| filter(args)` and `is [not] test(args)` / `is test arg`, left to right.
  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (at(TokenType::kPipe)) {
        const size_t op_offset = offset();
        ++pos_;
        FilterCall call = parse_filter_call();
        node = std::make_unique<FilterExpr>(op_offset, std::move(node), std::move(call));
      } else if (at_name("is")) {
        const size_t op_offset = offset();
        ++pos_;
        auto test = std::make_unique<TestExpr>(op_offset, std::move(node));
        if (at_name("not")) {
          ++pos_;
          test->negated = true;
        }
        const size_t name_offset = offset();
        // Test names may be keywords or literals: `is none`, `is true`, `is in`.
        if (!at(TokenType::kIdentifier)) fail_expected("a test name after 'is'");
        test->name = tokens_[pos_++].value;
        const std::optional<Test> found = find_test(test->name);
        if (!found) fail("unknown test '" + test->name + "'", name_offset);
        test->test = *found;
        if (at(TokenType::kOpenParen)) {
          test->args = parse_call_args();
        } else if (starts_test_argument()) {
          Argument arg;
          arg.kind = Argument::Kind::kPositional;
          arg.value = parse_postfix(parse_primary());
          test->args.push_back(std::move(arg));
        }
        node = std::move(test);
      } else {
        return node;
      }
    }
  }

  // `x is divisibleby 3`, `x is sameas none`: a single argument without parentheses.
  bool starts_test_argument() const {
    if (at(TokenType::kIdentifier)) return !is_keyword(tokens_[pos_].value);
    return at(TokenType::kNumber) || at(TokenType::kString) || at(TokenType::kOpenBracket) ||
           at(TokenType::kOpenBrace);
  }

  static constexpr unsigned kUsesVarargs = 1;
  static constexpr unsigned kUsesKwargs = 2;

  std::vector<Token> tokens_;
  size_t end_offset_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<unsigned> special_name_uses_;  // one entry per macro body being parsed
  std::vector<ForStmt*> open_loops_;         // for statements whose body is being parsed
};

}  // namespace

std::unique_ptr<const Program> parse_program(std::string_view source) {
  auto program = std::make_unique<Program>();
  program->source = source;
  Parser parser(tokenize(program->source), program->source.size());
  program->body = parser.parse_template();
  return program;
}

}  // namespace helium::jinja
