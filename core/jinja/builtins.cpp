#include "core/jinja/builtins.h"

#include "core/jinja/text.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace ptrain::jinja {
namespace {

const std::vector<std::string> kFilters = {
    "abs",    "capitalize", "count", "d",       "default", "first", "float",  "int",   "items",  "join", "last",
    "length", "list",       "lower", "replace", "reverse", "safe",  "string", "title", "tojson", "trim", "upper"};
const std::vector<std::string> kTests = {"boolean", "defined",  "eq",       "equalto", "even",     "false",
                                         "float",   "integer",  "iterable", "mapping", "none",     "number",
                                         "odd",     "sequence", "string",   "true",    "undefined"};
const std::vector<std::string> kMethods = {"capitalize", "endswith", "get",     "items",  "keys",
                                           "lower",      "lstrip",   "replace", "rstrip", "split",
                                           "startswith", "strip",    "title",   "upper",  "values"};
const std::vector<std::string> kFunctions = {"namespace", "raise_exception", "range", "strftime_now"};

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

[[noreturn]] void fail(const SourcePosition& where, const std::string& message) { throw TemplateError(where, message); }

// The argument at `index`, else the keyword `name`, else `fallback`.
Value argument(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name,
               Value fallback = Value()) {
  if (index < args.size()) return args[index];
  for (const auto& [key, value] : kwargs) {
    if (key == name) return value;
  }
  return fallback;
}

const std::string& need_string(const Value& value, const std::string& what, const SourcePosition& where) {
  if (!value.is_string()) fail(where, what + " needs a string, got " + value.type_name());
  return value.as_string();
}

int64_t need_int(const Value& value, const std::string& what, const SourcePosition& where) {
  if (value.kind() != Value::Kind::kInt) fail(where, what + " needs an integer, got " + value.type_name());
  return value.as_int();
}

int64_t length_of(const Value& value, const SourcePosition& where) {
  if (value.is_string()) return text::length(value.as_string());
  if (value.is_list()) return static_cast<int64_t>(value.as_list().size());
  if (value.is_mapping()) return static_cast<int64_t>(value.as_dict().size());
  fail(where, "length of a " + value.type_name() + " value");
}

Value items_of(const Value& value, const std::string& what, const SourcePosition& where) {
  if (!value.is_mapping()) fail(where, what + " needs a dict, got " + value.type_name());
  List items;
  for (const auto& [key, item] : value.as_dict()) items.push_back(Value::list({Value::string(key), item}));
  return Value::list(std::move(items));
}

// What iterating yields: list items, a string's characters, a dict's keys.
List elements(const Value& value, const std::string& what, const SourcePosition& where) {
  if (value.is_list()) return value.as_list();
  List out;
  if (value.is_string()) {
    for (const uint32_t c : text::code_points(value.as_string())) out.push_back(Value::string(text::to_utf8({c})));
  } else if (value.is_mapping()) {
    for (const auto& entry : value.as_dict()) out.push_back(Value::string(entry.first));
  } else {
    fail(where, what + " needs a list, string or dict, got " + value.type_name());
  }
  return out;
}

Value string_method(const std::string& self, const std::string& name, const std::vector<Value>& args,
                    const Kwargs& kwargs, const SourcePosition& where) {
  const std::string what = "." + name + "()";
  if (name == "startswith" || name == "endswith") {
    const Value pattern = argument(args, kwargs, 0, "prefix");
    const List candidates = pattern.is_list() ? pattern.as_list() : List{pattern};
    for (const Value& candidate : candidates) {
      const std::string& p = need_string(candidate, what, where);
      const bool hit =
          p.size() <= self.size() && (name == "startswith" ? self.compare(0, p.size(), p) == 0
                                                           : self.compare(self.size() - p.size(), p.size(), p) == 0);
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value chars = argument(args, kwargs, 0, "chars");
    const std::string* set = chars.is_string() ? &chars.as_string() : nullptr;
    const text::Side side = name == "strip"    ? text::Side::kBoth
                            : name == "lstrip" ? text::Side::kLeft
                                               : text::Side::kRight;
    return Value::string(text::strip(self, set, side));
  }
  if (name == "split") {
    const Value sep = argument(args, kwargs, 0, "sep");
    const Value maxsplit = argument(args, kwargs, 1, "maxsplit", Value::integer(-1));
    if (sep.is_string() && sep.as_string().empty()) fail(where, ".split(): empty separator");
    List parts;
    for (auto& part :
         text::split(self, sep.is_string() ? &sep.as_string() : nullptr, need_int(maxsplit, what, where))) {
      parts.push_back(Value::string(std::move(part)));
    }
    return Value::list(std::move(parts));
  }
  if (name == "replace") {
    const std::string& old = need_string(argument(args, kwargs, 0, "old"), what, where);
    const std::string& replacement = need_string(argument(args, kwargs, 1, "new"), what, where);
    const int64_t count = need_int(argument(args, kwargs, 2, "count", Value::integer(-1)), what, where);
    return Value::string(text::replace(self, old, replacement, count));
  }
  if (name == "upper") return Value::string(text::upper(self));
  if (name == "lower") return Value::string(text::lower(self));
  if (name == "title") return Value::string(text::title(self));
  if (name == "capitalize") return Value::string(text::capitalize(self));
  fail(where, "a string has no method '" + what + "'");
}

Value dict_method(const Value& self, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  const SourcePosition& where) {
  if (name == "items") return items_of(self, ".items()", where);
  List out;
  if (name == "keys" || name == "values") {
    for (const auto& [key, value] : self.as_dict()) out.push_back(name == "keys" ? Value::string(key) : value);
    return Value::list(std::move(out));
  }
  if (name == "get") {
    const std::string& key = need_string(argument(args, kwargs, 0, "key"), ".get()", where);
    const Value value = self.get(key);
    return value.is_undefined() ? argument(args, kwargs, 1, "default", Value::none()) : value;
  }
  fail(where, "a dict has no method '." + name + "()'");
}

Value join_filter(const Value& operand, const std::vector<Value>& args, const Kwargs& kwargs,
                  const SourcePosition& where) {
  const Value separator = argument(args, kwargs, 0, "d", Value::string(""));
  const Value attribute = argument(args, kwargs, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : elements(operand, "join", where)) {
    if (!first) out += need_string(separator, "join", where);
    first = false;
    out += (attribute.is_string() ? item.get(attribute.as_string()) : item).str();
  }
  return Value::string(std::move(out));
}

Value number_filter(const std::string& name, const Value& operand, const SourcePosition& where) {
  if (name == "abs") {
    if (operand.kind() == Value::Kind::kInt) return Value::integer(std::llabs(operand.as_int()));
    if (operand.is_number()) return Value::real(std::fabs(operand.as_double()));
    fail(where, "abs of a " + operand.type_name() + " value");
  }
  const bool to_int = name == "int";
  double number = 0;
  if (operand.is_number()) {
    number = operand.as_double();
  } else if (operand.kind() == Value::Kind::kBool) {
    number = operand.as_bool() ? 1 : 0;
  } else if (operand.is_string()) {
    try {
      number = std::stod(operand.as_string());
    } catch (const std::exception&) {
      number = 0;  // Jinja's int/float filters give their default, 0
    }
  }
  return to_int ? Value::integer(static_cast<int64_t>(number)) : Value::real(number);
}

Value sequence_filter(const std::string& name, const Value& operand, const SourcePosition& where) {
  if (name == "list") return Value::list(elements(operand, name, where));
  if (name == "first" || name == "last") {
    const List items = elements(operand, name, where);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (operand.is_string()) {
      std::vector<uint32_t> points = text::code_points(operand.as_string());
      std::reverse(points.begin(), points.end());
      return Value::string(text::to_utf8(points));
    }
    List items = elements(operand, name, where);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  fail(where, "unknown filter '" + name + "'");
}

}  // namespace

bool is_known_filter(const std::string& name) { return contains(kFilters, name); }
bool is_known_test(const std::string& name) { return contains(kTests, name); }
bool is_known_method(const std::string& name) { return contains(kMethods, name); }
bool is_known_function(const std::string& name) { return contains(kFunctions, name); }
std::string known_filters() { return joined(kFilters); }
std::string known_tests() { return joined(kTests); }
std::string known_methods() { return joined(kMethods); }
std::string known_functions() { return joined(kFunctions); }

Value apply_filter(const std::string& name, const Value& operand, const std::vector<Value>& args, const Kwargs& kwargs,
                   const SourcePosition& where) {
  const std::string what = "filter '" + name + "'";
  if (name == "default" || name == "d") {
    const bool boolean = argument(args, kwargs, 1, "boolean", Value::boolean(false)).truthy();
    const bool missing = boolean ? !operand.truthy() : operand.is_undefined();
    return missing ? argument(args, kwargs, 0, "default_value", Value::string("")) : operand;
  }
  if (name == "length" || name == "count") return Value::integer(length_of(operand, where));
  if (name == "tojson") {
    const Value indent = argument(args, kwargs, 0, "indent");
    return Value::string(to_json(operand, indent.kind() == Value::Kind::kInt ? static_cast<int>(indent.as_int()) : -1));
  }
  if (name == "items") return items_of(operand, what, where);
  if (name == "join") return join_filter(operand, args, kwargs, where);
  if (name == "string" || name == "safe") return operand.is_string() ? operand : Value::string(operand.str());
  if (name == "abs" || name == "int" || name == "float") return number_filter(name, operand, where);
  if (name == "list" || name == "first" || name == "last" || name == "reverse") {
    return sequence_filter(name, operand, where);
  }
  const std::string& self = need_string(operand, what, where);
  if (name == "trim") {
    const Value chars = argument(args, kwargs, 0, "chars");
    return Value::string(text::strip(self, chars.is_string() ? &chars.as_string() : nullptr, text::Side::kBoth));
  }
  if (name == "replace") return string_method(self, "replace", args, kwargs, where);
  return string_method(self, name, {}, {}, where);  // upper, lower, title, capitalize
}

bool apply_test(const std::string& name, const Value& operand, const std::vector<Value>& args,
                const SourcePosition& where) {
  using Kind = Value::Kind;
  if (name == "defined") return !operand.is_undefined();
  if (name == "undefined") return operand.is_undefined();
  if (name == "none") return operand.is_none();
  if (name == "string") return operand.is_string();
  if (name == "mapping") return operand.kind() == Kind::kDict;
  if (name == "iterable") return operand.is_string() || operand.is_list() || operand.is_mapping();
  if (name == "sequence") return operand.is_string() || operand.is_list() || operand.kind() == Kind::kDict;
  if (name == "number") return operand.is_number();
  if (name == "integer") return operand.kind() == Kind::kInt;
  if (name == "float") return operand.kind() == Kind::kFloat;
  if (name == "boolean") return operand.kind() == Kind::kBool;
  if (name == "true" || name == "false") return operand.kind() == Kind::kBool && operand.as_bool() == (name == "true");
  if (name == "odd" || name == "even")
    return (need_int(operand, "test '" + name + "'", where) % 2 != 0) == (name == "odd");
  if (name == "eq" || name == "equalto") {
    if (args.empty()) fail(where, "test '" + name + "' needs a value to compare with");
    return operand.equals(args[0]);
  }
  fail(where, "unknown test '" + name + "'");
}

Value call_method(const Value& object, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  const SourcePosition& where) {
  if (object.is_string()) return string_method(object.as_string(), name, args, kwargs, where);
  if (object.kind() == Value::Kind::kDict) return dict_method(object, name, args, kwargs, where);
  fail(where, "method '." + name + "()' called on a " + object.type_name() + " value");
}

Value call_function(const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                    const SourcePosition& where) {
  if (name == "raise_exception") throw TemplateRaised(args.empty() ? std::string() : args[0].str());
  if (name == "namespace") {
    Dict entries;
    if (!args.empty()) {
      if (args[0].kind() != Value::Kind::kDict) fail(where, "namespace() takes a dict and keyword arguments");
      entries = args[0].as_dict();
    }
    for (const auto& [key, value] : kwargs) entries.emplace_back(key, value);
    return Value::namespace_of(std::move(entries));
  }
  if (name == "strftime_now") {  // transformers: datetime.now().strftime(format), the local date and time
    const std::string& format = need_string(argument(args, kwargs, 0, "format"), "strftime_now()", where);
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[256];
    const size_t size = std::strftime(buffer, sizeof buffer, format.c_str(), &local);
    return Value::string(std::string(buffer, size));
  }
  if (name == "range") {
    if (args.empty() || args.size() > 3) fail(where, "range() takes one to three integers");
    const int64_t start = args.size() == 1 ? 0 : need_int(args[0], "range()", where);
    const int64_t stop = need_int(args[args.size() == 1 ? 0 : 1], "range()", where);
    const int64_t step = args.size() == 3 ? need_int(args[2], "range()", where) : 1;
    if (step == 0) fail(where, "range() step must not be zero");
    List items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
    return Value::list(std::move(items));
  }
  fail(where, "unknown function '" + name + "()'");
}

}  // namespace ptrain::jinja
