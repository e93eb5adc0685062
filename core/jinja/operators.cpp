#include "core/jinja/operators.h"

#include "core/jinja/text.h"

#include <cmath>

namespace ptrain::jinja {
namespace {

[[noreturn]] void refuse(const std::string& op, const Value& left, const Value& right, const SourcePosition& where) {
  throw TemplateError(where,
                      "operator '" + op + "' between a " + left.type_name() + " and a " + right.type_name() + " value");
}

bool contains(const Value& container, const Value& item, const SourcePosition& where) {
  if (container.is_string()) {
    if (!item.is_string()) refuse("in", item, container, where);
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& element : container.as_list()) {
      if (element.equals(item)) return true;
    }
    return false;
  }
  if (container.is_mapping()) return item.is_string() && !container.get(item.as_string()).is_undefined();
  refuse("in", item, container, where);
}

bool less(const Value& left, const Value& right, const std::string& op, const SourcePosition& where) {
  if (left.is_number() && right.is_number()) return left.as_double() < right.as_double();
  if (left.is_string() && right.is_string()) return left.as_string() < right.as_string();
  refuse(op, left, right, where);
}

Value compare(const std::string& op, const Value& left, const Value& right, const SourcePosition& where) {
  if (op == "==") return Value::boolean(left.equals(right));
  if (op == "!=") return Value::boolean(!left.equals(right));
  if (op == "<") return Value::boolean(less(left, right, op, where));
  if (op == ">") return Value::boolean(less(right, left, op, where));
  if (op == "<=") return Value::boolean(!less(right, left, op, where));
  return Value::boolean(!less(left, right, op, where));  // >=
}

Value repeat(const Value& sequence, int64_t times) {
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value::string(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return Value::list(std::move(out));
}

Value arithmetic(const std::string& op, const Value& left, const Value& right, const SourcePosition& where) {
  const bool integers = left.kind() == Value::Kind::kInt && right.kind() == Value::Kind::kInt;
  const double a = left.as_double(), b = right.as_double();
  if (op == "+") return integers ? Value::integer(left.as_int() + right.as_int()) : Value::real(a + b);
  if (op == "-") return integers ? Value::integer(left.as_int() - right.as_int()) : Value::real(a - b);
  if (op == "*") return integers ? Value::integer(left.as_int() * right.as_int()) : Value::real(a * b);
  if (op == "**") {
    if (integers && right.as_int() >= 0) return Value::integer(static_cast<int64_t>(std::llround(std::pow(a, b))));
    return Value::real(std::pow(a, b));
  }
  if (b == 0) throw TemplateError(where, "division by zero");
  if (op == "/") return Value::real(a / b);
  if (op == "//") {
    if (!integers) return Value::real(std::floor(a / b));
    const int64_t q = left.as_int() / right.as_int();
    return Value::integer((left.as_int() % right.as_int() != 0 && ((left.as_int() < 0) != (right.as_int() < 0))) ? q - 1
                                                                                                                 : q);
  }
  // %: Python's modulo takes the divisor's sign.
  if (integers) {
    const int64_t r = left.as_int() % right.as_int();
    return Value::integer(r != 0 && ((r < 0) != (right.as_int() < 0)) ? r + right.as_int() : r);
  }
  const double r = std::fmod(a, b);
  return Value::real(r != 0 && ((r < 0) != (b < 0)) ? r + b : r);
}

int64_t bound(std::optional<int64_t> index, int64_t fallback, int64_t size, bool negative_step) {
  if (!index) return fallback;
  int64_t i = *index < 0 ? *index + size : *index;
  const int64_t low = negative_step ? -1 : 0;
  const int64_t high = negative_step ? size - 1 : size;
  return i < low ? low : i > high ? high : i;
}

}  // namespace

Value binary_operation(const std::string& op, const Value& left, const Value& right, const SourcePosition& where) {
  if (op == "~") return Value::string(left.str() + right.str());
  if (op == "in") return Value::boolean(contains(right, left, where));
  if (op == "not in") return Value::boolean(!contains(right, left, where));
  if (op == "==" || op == "!=" || op == "<" || op == ">" || op == "<=" || op == ">=") {
    return compare(op, left, right, where);
  }
  if (op == "+" && left.is_string() && right.is_string()) return Value::string(left.as_string() + right.as_string());
  if (op == "+" && left.is_list() && right.is_list()) {
    List items = left.as_list();
    items.insert(items.end(), right.as_list().begin(), right.as_list().end());
    return Value::list(std::move(items));
  }
  if (op == "*" && (left.is_string() || left.is_list()) && right.kind() == Value::Kind::kInt) {
    return repeat(left, right.as_int());
  }
  if (left.is_number() && right.is_number()) return arithmetic(op, left, right, where);
  refuse(op, left, right, where);
}

Value slice(const Value& value, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step,
            const SourcePosition& where) {
  const int64_t stride = step.value_or(1);
  if (stride == 0) throw TemplateError(where, "slice step cannot be zero");
  const bool backwards = stride < 0;
  std::vector<uint32_t> points;
  if (value.is_string()) {
    points = text::code_points(value.as_string());
  } else if (!value.is_list()) {
    throw TemplateError(where, "slicing a " + value.type_name() + " value");
  }
  const int64_t size =
      value.is_string() ? static_cast<int64_t>(points.size()) : static_cast<int64_t>(value.as_list().size());
  const int64_t first = bound(start, backwards ? size - 1 : 0, size, backwards);
  const int64_t last = bound(stop, backwards ? -1 : size, size, backwards);
  std::vector<int64_t> picked;
  for (int64_t i = first; backwards ? i > last : i < last; i += stride) picked.push_back(i);
  if (value.is_string()) {
    std::vector<uint32_t> out;
    for (const int64_t i : picked) out.push_back(points[static_cast<size_t>(i)]);
    return Value::string(text::to_utf8(out));
  }
  List out;
  for (const int64_t i : picked) out.push_back(value.as_list()[static_cast<size_t>(i)]);
  return Value::list(std::move(out));
}

}  // namespace ptrain::jinja
