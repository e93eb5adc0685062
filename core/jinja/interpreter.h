// Runs a parsed template: expressions with Python's semantics, statements
// with Jinja's scoping (a for loop has its own scope; `namespace` objects
// carry values out of it).
#pragma once

#include "core/jinja/ast.h"
#include "core/jinja/template.h"

#include <string>
#include <vector>

namespace ptrain::jinja {

class Interpreter {
 public:
  Interpreter(const Dict& globals, RenderTrace* trace);
  std::string run(const Body& body);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow execute(const Body& body);
  Flow execute(const Stmt& stmt);
  Flow execute_for(const Stmt& stmt);
  void bind_loop_targets(const Stmt& stmt, const Value& item);  // `for a, b in ...` unpacks
  void execute_set(const Stmt& stmt);
  void assign(const Expr& target, const Value& value);

  Value evaluate(const Expr& expr);
  Value evaluate_binary(const Expr& expr);
  Value evaluate_call(const Expr& expr);
  Value evaluate_subscript(const Expr& expr);
  Value evaluate_slice(const Expr& expr);
  std::vector<Value> evaluate_args(const Expr& expr, size_t first);

  Value lookup(const std::string& name) const;
  void define(const std::string& name, Value value);

  std::vector<Dict> scopes_;  // globals first, innermost last
  std::string output_;
  RenderTrace* trace_;  // null while capturing a {% set %} block
};

}  // namespace ptrain::jinja
