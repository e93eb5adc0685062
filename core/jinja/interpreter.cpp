#include "core/jinja/interpreter.h"

#include "core/jinja/builtins.h"
#include "core/jinja/operators.h"
#include "core/jinja/text.h"

namespace ptrain::jinja {
namespace {

std::optional<int64_t> optional_index(const Value& value, const SourcePosition& where) {
  if (value.is_undefined() || value.is_none()) return std::nullopt;
  if (value.kind() != Value::Kind::kInt)
    throw TemplateError(where, "slice bound must be an integer, got " + value.type_name());
  return value.as_int();
}

// The `loop` variable of one iteration.
Value loop_variable(const List& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto index = static_cast<int64_t>(i);
  return Value::dict({{"index", Value::integer(index + 1)},
                      {"index0", Value::integer(index)},
                      {"revindex", Value::integer(n - index)},
                      {"revindex0", Value::integer(n - index - 1)},
                      {"first", Value::boolean(i == 0)},
                      {"last", Value::boolean(index == n - 1)},
                      {"length", Value::integer(n)},
                      {"previtem", i > 0 ? items[i - 1] : Value()},
                      {"nextitem", index + 1 < n ? items[i + 1] : Value()}});
}

// What a for loop visits: list items, a dict's keys, a string's characters.
List iteration_items(const Value& iterable, const SourcePosition& where) {
  if (iterable.is_list()) return iterable.as_list();
  List items;
  if (iterable.is_mapping()) {
    for (const auto& entry : iterable.as_dict()) items.push_back(Value::string(entry.first));
  } else if (iterable.is_string()) {
    for (const uint32_t c : text::code_points(iterable.as_string())) items.push_back(Value::string(text::to_utf8({c})));
  } else if (!iterable.is_undefined() && !iterable.is_none()) {
    throw TemplateError(where, "a for loop over a " + iterable.type_name() + " value");
  } else if (iterable.is_none()) {
    throw TemplateError(where, "a for loop over none");
  }
  return items;  // undefined iterates as empty, as in Jinja
}

}  // namespace

Interpreter::Interpreter(const Dict& globals, RenderTrace* trace) : scopes_{globals}, trace_(trace) {}

std::string Interpreter::run(const Body& body) {
  execute(body);
  return std::move(output_);
}

Interpreter::Flow Interpreter::execute(const Body& body) {
  for (const auto& stmt : body) {
    const Flow flow = execute(*stmt);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::execute(const Stmt& stmt) {
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      output_ += stmt.text;
      return Flow::kNormal;
    case Stmt::Kind::kOutput:
      output_ += evaluate(*stmt.value).str();
      return Flow::kNormal;
    case Stmt::Kind::kIf:
      for (const auto& [condition, body] : stmt.branches) {
        if (evaluate(*condition).truthy()) return execute(body);
      }
      return execute(stmt.else_body);
    case Stmt::Kind::kFor:
      return execute_for(stmt);
    case Stmt::Kind::kSet:
      execute_set(stmt);
      return Flow::kNormal;
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kGeneration: {
      const size_t begin = output_.size();
      const Flow flow = execute(stmt.body);
      if (trace_) trace_->generation_spans.emplace_back(begin, output_.size());
      return flow;
    }
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::execute_for(const Stmt& stmt) {
  List items = iteration_items(evaluate(*stmt.value), stmt.position);
  scopes_.emplace_back();
  if (stmt.condition) {  // `for x in xs if c` filters before loop.* counts
    List kept;
    for (const Value& item : items) {
      bind_loop_targets(stmt, item);
      if (evaluate(*stmt.condition).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const Value& item = items[i];
    bind_loop_targets(stmt, item);
    define("loop", loop_variable(items, i));
    const size_t begin = output_.size();
    const Flow flow = execute(stmt.body);
    if (trace_ && item.is_mapping()) trace_->visits.push_back({item.identity(), begin, output_.size()});
    if (flow == Flow::kBreak) break;
  }
  scopes_.pop_back();
  if (items.empty()) return execute(stmt.else_body);
  return Flow::kNormal;
}

void Interpreter::bind_loop_targets(const Stmt& stmt, const Value& item) {
  if (stmt.loop_targets.size() == 1) {
    define(stmt.loop_targets[0], item);
    return;
  }
  if (!item.is_list() || item.as_list().size() != stmt.loop_targets.size()) {
    throw TemplateError(stmt.position, "cannot unpack a " + item.type_name() + " value into " +
                                           std::to_string(stmt.loop_targets.size()) + " loop variables");
  }
  for (size_t k = 0; k < stmt.loop_targets.size(); ++k) define(stmt.loop_targets[k], item.as_list()[k]);
}

void Interpreter::execute_set(const Stmt& stmt) {
  if (stmt.value) {
    assign(*stmt.target, evaluate(*stmt.value));
    return;
  }
  // {% set name %}...{% endset %}: the body's output, captured.
  std::string outer;
  std::swap(outer, output_);
  RenderTrace* const trace = trace_;
  trace_ = nullptr;  // offsets inside the capture are not output offsets
  execute(stmt.body);
  trace_ = trace;
  std::swap(outer, output_);
  assign(*stmt.target, Value::string(std::move(outer)));
}

void Interpreter::assign(const Expr& target, const Value& value) {
  if (target.kind == Expr::Kind::kName) {
    define(target.name, value);
  } else if (target.kind == Expr::Kind::kAttribute) {
    const Value object = evaluate(*target.args[0]);
    if (object.kind() != Value::Kind::kNamespace) {
      throw TemplateError(target.position, "cannot set attribute '" + target.name + "' of a " + object.type_name() +
                                               " value (only of a namespace())");
    }
    Dict& entries = object.mutable_dict();
    for (auto& [key, entry] : entries) {
      if (key == target.name) {
        entry = value;
        return;
      }
    }
    entries.emplace_back(target.name, value);
  } else {  // tuple of names
    if (!value.is_list() || value.as_list().size() != target.args.size()) {
      throw TemplateError(target.position, "cannot unpack a " + value.type_name() + " value into " +
                                               std::to_string(target.args.size()) + " names");
    }
    for (size_t i = 0; i < target.args.size(); ++i) define(target.args[i]->name, value.as_list()[i]);
  }
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    for (const auto& [key, value] : *scope) {
      if (key == name) return value;
    }
  }
  return Value();
}

void Interpreter::define(const std::string& name, Value value) {
  Dict& scope = scopes_.back();
  for (auto& [key, entry] : scope) {
    if (key == name) {
      entry = std::move(value);
      return;
    }
  }
  scope.emplace_back(name, std::move(value));
}

std::vector<Value> Interpreter::evaluate_args(const Expr& expr, size_t first) {
  std::vector<Value> args;
  for (size_t i = first; i < expr.args.size(); ++i) args.push_back(evaluate(*expr.args[i]));
  return args;
}

Value Interpreter::evaluate(const Expr& expr) {
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      return expr.literal;
    case Expr::Kind::kName: {
      Value value = lookup(expr.name);
      if (value.is_undefined() && is_known_function(expr.name)) return Value::function(expr.name);
      return value;
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple:
      return Value::list(evaluate_args(expr, 0));
    case Expr::Kind::kDict: {
      Dict entries;
      for (size_t i = 0; i < expr.keys.size(); ++i) {
        const Value key = evaluate(*expr.keys[i]);
        if (!key.is_string()) throw TemplateError(expr.position, "dict keys must be strings, got " + key.type_name());
        entries.emplace_back(key.as_string(), evaluate(*expr.args[i]));
      }
      return Value::dict(std::move(entries));
    }
    case Expr::Kind::kAttribute:
      return evaluate(*expr.args[0]).get(expr.name);
    case Expr::Kind::kSubscript:
      return evaluate_subscript(expr);
    case Expr::Kind::kSlice:
      return evaluate_slice(expr);
    case Expr::Kind::kCall:
      return evaluate_call(expr);
    case Expr::Kind::kFilter: {
      Kwargs kwargs;
      for (const auto& [name, value] : expr.kwargs) kwargs.emplace_back(name, evaluate(*value));
      return apply_filter(expr.name, evaluate(*expr.args[0]), evaluate_args(expr, 1), kwargs, expr.position);
    }
    case Expr::Kind::kTest:
      return Value::boolean(apply_test(expr.name, evaluate(*expr.args[0]), evaluate_args(expr, 1), expr.position) !=
                            expr.negated);
    case Expr::Kind::kUnary: {
      const Value operand = evaluate(*expr.args[0]);
      if (expr.name == "not") return Value::boolean(!operand.truthy());
      if (!operand.is_number())
        throw TemplateError(expr.position, "unary '" + expr.name + "' on a " + operand.type_name() + " value");
      if (expr.name == "+") return operand;
      return operand.kind() == Value::Kind::kInt ? Value::integer(-operand.as_int())
                                                 : Value::real(-operand.as_double());
    }
    case Expr::Kind::kBinary:
      return evaluate_binary(expr);
    case Expr::Kind::kConditional:
      if (evaluate(*expr.args[1]).truthy()) return evaluate(*expr.args[0]);
      return expr.args[2] ? evaluate(*expr.args[2]) : Value();
  }
  return Value();
}

Value Interpreter::evaluate_binary(const Expr& expr) {
  const Value left = evaluate(*expr.args[0]);
  // and/or return an operand, as in Python, and skip the right one when they can.
  if (expr.name == "and") return left.truthy() ? evaluate(*expr.args[1]) : left;
  if (expr.name == "or") return left.truthy() ? left : evaluate(*expr.args[1]);
  return binary_operation(expr.name, left, evaluate(*expr.args[1]), expr.position);
}

Value Interpreter::evaluate_call(const Expr& expr) {
  const Expr& callee = *expr.args[0];
  Kwargs kwargs;
  for (const auto& [name, value] : expr.kwargs) kwargs.emplace_back(name, evaluate(*value));
  const std::vector<Value> args = evaluate_args(expr, 1);
  if (callee.kind == Expr::Kind::kName) return call_function(callee.name, args, kwargs, expr.position);
  return call_method(evaluate(*callee.args[0]), callee.name, args, kwargs, expr.position);
}

Value Interpreter::evaluate_subscript(const Expr& expr) {
  const Value object = evaluate(*expr.args[0]);
  const Value key = evaluate(*expr.args[1]);
  if (object.is_mapping()) {
    if (!key.is_string()) return Value();
    return object.get(key.as_string());
  }
  if ((object.is_list() || object.is_string()) && key.kind() == Value::Kind::kInt) {
    const Value item =
        slice(object, key.as_int(), key.as_int() == -1 ? std::nullopt : std::optional<int64_t>(key.as_int() + 1),
              std::nullopt, expr.position);
    if (object.is_string()) return item.as_string().empty() ? Value() : item;
    return item.as_list().empty() ? Value() : item.as_list()[0];
  }
  return Value();  // Jinja: a missing item is undefined
}

Value Interpreter::evaluate_slice(const Expr& expr) {
  const Value object = evaluate(*expr.args[0]);
  std::optional<int64_t> parts[3];
  for (size_t i = 0; i < 3; ++i) {
    if (expr.args[i + 1]) parts[i] = optional_index(evaluate(*expr.args[i + 1]), expr.position);
  }
  return slice(object, parts[0], parts[1], parts[2], expr.position);
}

}  // namespace ptrain::jinja
