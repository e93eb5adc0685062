// A Jinja value with Python's semantics (Jinja runs on Python, and Hugging
// Face renders chat templates with it): undefined, none, booleans, integers,
// floats, strings, lists and insertion-ordered dicts. Lists and dicts are
// shared, so copying a value is cheap and a dict keeps its identity — the
// chat renderer recognises a message by it when a loop visits it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::jinja {

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python's dict

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value real(double value);
  static Value string(std::string value);
  static Value list(List items);
  static Value dict(Dict entries);
  static Value namespace_of(Dict entries);  // namespace(...): a dict whose attributes `set` may assign
  static Value function(std::string name);  // a global function (builtins.h), so that `f is defined` holds
  static Value from_json(const nlohmann::ordered_json& json);  // keeps the key order

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::kInt ? static_cast<double>(int_) : real_; }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }  // namespaces only: `set ns.key = ...`
  const void* identity() const { return dict_ ? static_cast<const void*>(dict_.get()) : list_.get(); }

  // Member of a dict by key; undefined when absent.
  Value get(const std::string& key) const;

  bool truthy() const;                    // Python's bool()
  std::string str() const;                // Python's str(), as {{ value }} prints it
  std::string type_name() const;          // Python's type name, for errors
  bool equals(const Value& other) const;  // Python's ==

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double real_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
};

// Python's json.dumps(value, ensure_ascii=False) with transformers' tojson
// arguments: default separators ", " and ": ", or newlines and `indent` spaces.
std::string to_json(const Value& value, int indent = -1);

}  // namespace ptrain::jinja
