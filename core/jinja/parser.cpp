#include "core/jinja/parser.h"

#include "core/jinja/builtins.h"

namespace ptrain::jinja {
namespace {

std::string describe(const Token& token) {
  switch (token.kind) {
    case Token::Kind::kEnd:
      return "the end of the template";
    case Token::Kind::kText:
      return "text";
    case Token::Kind::kCloseStatement:
      return "'%}'";
    case Token::Kind::kCloseExpression:
      return "'}}'";
    case Token::Kind::kString:
      return "string '" + token.text + "'";
    default:
      return "'" + token.text + "'";
  }
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Body parse_template() {
    Body body = parse_body({}, nullptr);
    if (peek().kind != Token::Kind::kEnd) fail(peek(), "unexpected " + describe(peek()));
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  [[noreturn]] static void fail(const Token& at, const std::string& message) {
    throw TemplateError(at.position, message);
  }

  bool is_operator(const char* text, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::kOperator && peek(ahead).text == text;
  }
  bool is_name(const char* text, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::kName && peek(ahead).text == text;
  }
  bool accept_operator(const char* text) {
    if (!is_operator(text)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(const char* text) {
    if (!is_name(text)) return false;
    ++pos_;
    return true;
  }
  void expect_operator(const char* text) {
    if (!accept_operator(text)) fail(peek(), std::string("expected '") + text + "', got " + describe(peek()));
  }
  void expect_name(const char* text) {
    if (!accept_name(text)) fail(peek(), std::string("expected '") + text + "', got " + describe(peek()));
  }
  std::string expect_identifier() {
    if (peek().kind != Token::Kind::kName) fail(peek(), "expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_close_statement() {
    if (peek().kind != Token::Kind::kCloseStatement) fail(peek(), "expected '%}', got " + describe(peek()));
    ++pos_;
  }

  // Statements until a {% tag %} whose name is in `ends` (left unconsumed,
  // after its {%); `opener` is the tag name of the block they belong to.
  Body parse_body(const std::vector<std::string>& ends, const Token* opener) {
    Body body;
    for (;;) {
      const Token& token = peek();
      if (token.kind == Token::Kind::kEnd) {
        if (opener) fail(*opener, "{% " + opener->text + " %} is never closed: missing {% " + ends.back() + " %}");
        return body;
      }
      if (token.kind == Token::Kind::kText) {
        auto stmt = make_stmt(Stmt::Kind::kText, token);
        stmt->text = next().text;
        body.push_back(std::move(stmt));
      } else if (token.kind == Token::Kind::kOpenExpression) {
        next();
        auto stmt = make_stmt(Stmt::Kind::kOutput, token);
        stmt->value = parse_expression();
        if (peek().kind != Token::Kind::kCloseExpression) fail(peek(), "expected '}}', got " + describe(peek()));
        next();
        body.push_back(std::move(stmt));
      } else if (token.kind == Token::Kind::kOpenStatement) {
        const Token& tag = peek(1);
        for (const auto& end : ends) {
          if (tag.kind == Token::Kind::kName && tag.text == end) {
            next();
            return body;
          }
        }
        if (tag.kind == Token::Kind::kName && ends_a_block(tag.text)) fail_misplaced(tag, ends, opener);
        next();
        body.push_back(parse_statement());
      } else {
        fail(token, "unexpected " + describe(token));
      }
    }
  }

  static bool ends_a_block(const std::string& name) {
    for (const char* tag : {"elif", "else", "endif", "endfor", "endset", "endgeneration"}) {
      if (name == tag) return true;
    }
    return false;
  }

  // An end or continuation tag where the innermost open block does not end:
  // that block is the error (an `if` left open inside a `for`), so it is
  // named with its position.
  [[noreturn]] static void fail_misplaced(const Token& tag, const std::vector<std::string>& ends, const Token* opener) {
    const std::string found = "{% " + tag.text + " %}";
    if (!opener) fail(tag, "unexpected " + found + ": no open block ends or continues here");
    fail(*opener, "{% " + opener->text + " %} is left open: " + found + " at line " +
                      std::to_string(tag.position.line) + ", column " + std::to_string(tag.position.column) +
                      " comes before its {% " + ends.back() + " %}");
  }

  static std::unique_ptr<Stmt> make_stmt(Stmt::Kind kind, const Token& at) {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->position = at.position;
    return stmt;
  }

  std::unique_ptr<Stmt> parse_statement() {
    const Token& tag = peek();
    if (tag.kind != Token::Kind::kName) fail(tag, "expected a tag name after '{%', got " + describe(tag));
    if (tag.text == "if") return parse_if();
    if (tag.text == "for") return parse_for();
    if (tag.text == "set") return parse_set();
    if (tag.text == "generation") return parse_generation();
    if (tag.text == "break" || tag.text == "continue") {
      next();
      expect_close_statement();
      return make_stmt(tag.text == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, tag);
    }
    fail(tag, "unsupported tag '" + tag.text +
                  "' (supported: if, elif, else, for, set, break, continue, generation and their end tags)");
  }

  std::unique_ptr<Stmt> parse_if() {
    const Token& opener = next();
    auto stmt = make_stmt(Stmt::Kind::kIf, opener);
    for (;;) {
      ExprPtr condition = parse_expression();
      expect_close_statement();
      Body body = parse_body({"elif", "else", "endif"}, &opener);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
      const std::string end = next().text;
      if (end == "elif") continue;
      if (end == "else") {
        expect_close_statement();
        stmt->else_body = parse_body({"endif"}, &opener);
        next();
      }
      expect_close_statement();
      return stmt;
    }
  }

  std::unique_ptr<Stmt> parse_for() {
    const Token& opener = next();
    auto stmt = make_stmt(Stmt::Kind::kFor, opener);
    do {
      stmt->loop_targets.push_back(expect_identifier());
    } while (accept_operator(","));
    expect_name("in");
    stmt->value = parse_or();
    if (accept_name("if")) stmt->condition = parse_or();
    if (is_name("recursive")) fail(peek(), "unsupported: recursive for loops");
    expect_close_statement();
    stmt->body = parse_body({"else", "endfor"}, &opener);
    if (next().text == "else") {
      expect_close_statement();
      stmt->else_body = parse_body({"endfor"}, &opener);
      next();
    }
    expect_close_statement();
    return stmt;
  }

  std::unique_ptr<Stmt> parse_set() {
    const Token& opener = next();
    auto stmt = make_stmt(Stmt::Kind::kSet, opener);
    stmt->target = parse_set_target();
    if (accept_operator("=")) {
      stmt->value = parse_expression_or_tuple();
      expect_close_statement();
      return stmt;
    }
    if (stmt->target->kind != Expr::Kind::kName) fail(peek(), "a {% set %} block assigns one name");
    expect_close_statement();
    stmt->body = parse_body({"endset"}, &opener);
    next();
    expect_close_statement();
    return stmt;
  }

  // name, ns.attribute, or a, b (unpacking).
  ExprPtr parse_set_target() {
    const Token& first = peek();
    auto target = make_expr(Expr::Kind::kName, first);
    target->name = expect_identifier();
    if (accept_operator(".")) {
      auto attribute = make_expr(Expr::Kind::kAttribute, first);
      attribute->name = expect_identifier();
      attribute->args.push_back(std::move(target));
      return attribute;
    }
    if (!is_operator(",")) return target;
    auto tuple = make_expr(Expr::Kind::kTuple, first);
    tuple->args.push_back(std::move(target));
    while (accept_operator(",")) {
      auto name = make_expr(Expr::Kind::kName, peek());
      name->name = expect_identifier();
      tuple->args.push_back(std::move(name));
    }
    return tuple;
  }

  std::unique_ptr<Stmt> parse_generation() {
    const Token& opener = next();
    auto stmt = make_stmt(Stmt::Kind::kGeneration, opener);
    expect_close_statement();
    stmt->body = parse_body({"endgeneration"}, &opener);
    next();
    expect_close_statement();
    return stmt;
  }

  static ExprPtr make_expr(Expr::Kind kind, const Token& at) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->position = at.position;
    return expr;
  }
  static ExprPtr binary(const Token& at, std::string op, ExprPtr left, ExprPtr right) {
    auto expr = make_expr(Expr::Kind::kBinary, at);
    expr->name = std::move(op);
    expr->args.push_back(std::move(left));
    expr->args.push_back(std::move(right));
    return expr;
  }

  // `a, b` without parentheses (the right side of a set).
  ExprPtr parse_expression_or_tuple() {
    const Token& start = peek();
    ExprPtr first = parse_expression();
    if (!is_operator(",")) return first;
    auto tuple = make_expr(Expr::Kind::kTuple, start);
    tuple->args.push_back(std::move(first));
    while (accept_operator(",")) tuple->args.push_back(parse_expression());
    return tuple;
  }

  ExprPtr parse_expression() {
    const Token& start = peek();
    ExprPtr value = parse_or();
    if (!is_name("if")) return value;
    next();
    auto conditional = make_expr(Expr::Kind::kConditional, start);
    conditional->args.push_back(std::move(value));
    conditional->args.push_back(parse_or());
    conditional->args.push_back(accept_name("else") ? parse_expression() : nullptr);
    return conditional;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const Token& at = next();  // consumed before the right operand is parsed
      left = binary(at, "or", std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const Token& at = next();
      left = binary(at, "and", std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (!is_name("not")) return parse_compare();
    auto expr = make_expr(Expr::Kind::kUnary, next());
    expr->name = "not";
    expr->args.push_back(parse_not());
    return expr;
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_add();
    for (;;) {
      const Token& at = peek();
      if (at.kind == Token::Kind::kOperator && (at.text == "==" || at.text == "!=" || at.text == "<" ||
                                                at.text == "<=" || at.text == ">" || at.text == ">=")) {
        next();
        left = binary(at, at.text, std::move(left), parse_add());
      } else if (is_name("in")) {
        next();
        left = binary(at, "in", std::move(left), parse_add());
      } else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        left = binary(at, "not in", std::move(left), parse_add());
      } else {
        return left;
      }
    }
  }

  ExprPtr parse_add() {
    ExprPtr left = parse_concat();
    while (is_operator("+") || is_operator("-")) {
      const Token& at = next();
      left = binary(at, at.text, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_multiply();
    while (is_operator("~")) {
      const Token& at = next();
      left = binary(at, "~", std::move(left), parse_multiply());
    }
    return left;
  }

  ExprPtr parse_multiply() {
    ExprPtr left = parse_power();
    while (is_operator("*") || is_operator("/") || is_operator("//") || is_operator("%")) {
      const Token& at = next();
      left = binary(at, at.text, std::move(left), parse_power());
    }
    return left;
  }

  ExprPtr parse_power() {
    ExprPtr left = parse_unary();
    while (is_operator("**")) {
      const Token& at = next();
      left = binary(at, "**", std::move(left), parse_unary());
    }
    return left;
  }

  ExprPtr parse_unary() {
    if (is_operator("-") || is_operator("+")) {
      auto expr = make_expr(Expr::Kind::kUnary, peek());
      expr->name = next().text;
      expr->args.push_back(parse_unary());
      return expr;
    }
    return parse_filters(parse_postfix(parse_primary()));
  }

  ExprPtr parse_primary() {
    const Token& token = peek();
    switch (token.kind) {
      case Token::Kind::kName:
        return parse_name();
      case Token::Kind::kString: {
        auto expr = make_expr(Expr::Kind::kLiteral, token);
        std::string text;
        while (peek().kind == Token::Kind::kString) text += next().text;  // "a" "b" is "ab"
        expr->literal = Value::string(std::move(text));
        return expr;
      }
      case Token::Kind::kInteger:
      case Token::Kind::kFloat: {
        auto expr = make_expr(Expr::Kind::kLiteral, next());
        expr->literal = token.kind == Token::Kind::kInteger ? Value::integer(std::stoll(token.text))
                                                            : Value::real(std::stod(token.text));
        return expr;
      }
      case Token::Kind::kOperator:
        if (token.text == "(") return parse_parenthesized();
        if (token.text == "[") return parse_list();
        if (token.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    fail(token, "expected an expression, got " + describe(token));
  }

  ExprPtr parse_name() {
    const Token& token = next();
    auto expr = make_expr(Expr::Kind::kLiteral, token);
    if (token.text == "true" || token.text == "True") {
      expr->literal = Value::boolean(true);
    } else if (token.text == "false" || token.text == "False") {
      expr->literal = Value::boolean(false);
    } else if (token.text == "none" || token.text == "None") {
      expr->literal = Value::none();
    } else {
      expr->kind = Expr::Kind::kName;
      expr->name = token.text;
    }
    return expr;
  }

  ExprPtr parse_parenthesized() {
    const Token& open = next();
    if (accept_operator(")")) return make_expr(Expr::Kind::kTuple, open);
    ExprPtr first = parse_expression();
    if (accept_operator(")")) return first;
    auto tuple = make_expr(Expr::Kind::kTuple, open);
    tuple->args.push_back(std::move(first));
    while (accept_operator(",")) {
      if (is_operator(")")) break;
      tuple->args.push_back(parse_expression());
    }
    expect_operator(")");
    return tuple;
  }

  ExprPtr parse_list() {
    auto list = make_expr(Expr::Kind::kList, next());
    while (!accept_operator("]")) {
      list->args.push_back(parse_expression());
      if (!accept_operator(",")) {
        expect_operator("]");
        break;
      }
    }
    return list;
  }

  ExprPtr parse_dict() {
    auto dict = make_expr(Expr::Kind::kDict, next());
    while (!accept_operator("}")) {
      dict->keys.push_back(parse_expression());
      expect_operator(":");
      dict->args.push_back(parse_expression());
      if (!accept_operator(",")) {
        expect_operator("}");
        break;
      }
    }
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      const Token& at = peek();
      if (accept_operator(".")) {
        auto attribute = make_expr(Expr::Kind::kAttribute, at);
        if (peek().kind == Token::Kind::kInteger) {  // x.0 is x[0]
          attribute->kind = Expr::Kind::kSubscript;
          auto index = make_expr(Expr::Kind::kLiteral, peek());
          index->literal = Value::integer(std::stoll(next().text));
          attribute->args.push_back(std::move(node));
          attribute->args.push_back(std::move(index));
        } else {
          attribute->name = expect_identifier();
          attribute->args.push_back(std::move(node));
        }
        node = std::move(attribute);
      } else if (is_operator("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_operator("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const Token& open = next();
    std::vector<ExprPtr> parts(1);
    bool slice = false;
    for (;;) {
      if (is_operator("]")) break;
      if (accept_operator(":")) {
        slice = true;
        if (parts.size() == 3) fail(open, "a slice has at most three parts");
        parts.emplace_back();
        continue;
      }
      if (parts.back()) fail(peek(), "expected ':' or ']', got " + describe(peek()));
      parts.back() = parse_expression();
    }
    expect_operator("]");
    auto expr = make_expr(slice ? Expr::Kind::kSlice : Expr::Kind::kSubscript, open);
    if (!slice && !parts[0]) fail(open, "empty subscript []");
    expr->args.push_back(std::move(object));
    for (auto& part : parts) expr->args.push_back(std::move(part));
    while (slice && expr->args.size() < 4) expr->args.emplace_back();
    return expr;
  }

  // (positional..., name=value...) into `expr`'s args (after those it has) and kwargs.
  void parse_arguments(Expr& expr) {
    expect_operator("(");
    while (!accept_operator(")")) {
      if (peek().kind == Token::Kind::kName && is_operator("=", 1)) {
        std::string name = next().text;
        next();
        expr.kwargs.emplace_back(std::move(name), parse_expression());
      } else {
        if (!expr.kwargs.empty()) fail(peek(), "a positional argument follows a keyword argument");
        expr.args.push_back(parse_expression());
      }
      if (!accept_operator(",")) {
        expect_operator(")");
        break;
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    const Token& open = peek();
    if (callee->kind == Expr::Kind::kName && !is_known_function(callee->name)) {
      fail(open, "unsupported function '" + callee->name + "()' (supported: " + known_functions() + ")");
    }
    if (callee->kind == Expr::Kind::kAttribute && !is_known_method(callee->name)) {
      fail(open, "unsupported method '." + callee->name + "()' (supported: " + known_methods() + ")");
    }
    if (callee->kind != Expr::Kind::kName && callee->kind != Expr::Kind::kAttribute) {
      fail(open, "only functions and methods can be called");
    }
    auto call = make_expr(Expr::Kind::kCall, open);
    call->args.push_back(std::move(callee));
    parse_arguments(*call);
    return call;
  }

  ExprPtr parse_filters(ExprPtr node) {
    for (;;) {
      if (is_operator("|")) {
        next();
        const Token& name = peek();
        auto filter = make_expr(Expr::Kind::kFilter, name);
        filter->name = expect_identifier();
        if (!is_known_filter(filter->name)) {
          fail(name, "unsupported filter '" + filter->name + "' (supported: " + known_filters() + ")");
        }
        filter->args.push_back(std::move(node));
        if (is_operator("(")) parse_arguments(*filter);
        node = parse_postfix(std::move(filter));
      } else if (is_name("is")) {
        next();
        auto test = make_expr(Expr::Kind::kTest, peek());
        test->negated = accept_name("not");
        const Token& name = peek();
        if (name.kind == Token::Kind::kName && (name.text == "none" || name.text == "true" || name.text == "false")) {
          test->name = next().text;
        } else {
          test->name = expect_identifier();
        }
        if (!is_known_test(test->name)) {
          fail(name, "unsupported test 'is " + test->name + "' (supported: " + known_tests() + ")");
        }
        test->args.push_back(std::move(node));
        if (is_operator("(")) parse_arguments(*test);
        node = std::move(test);
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace ptrain::jinja
