#include "core/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ptrain::jinja {
namespace {

// Python's repr(float): the shortest text that reads back as the same double.
std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string text = buffer;
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

// Python's repr(str): single quotes unless the text has one and no double quote.
std::string string_repr(const std::string& text) {
  const bool double_quoted = text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = double_quoted ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == '\\' || c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + quote;
}

// Python's repr() of an element inside a printed list or dict.
std::string repr(const Value& value) { return value.is_string() ? string_repr(value.as_string()) : value.str(); }

void append_json(std::string& out, const Value& value, int indent, int depth) {
  const auto newline = [&](int level) {
    if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent * level), ' ');
  };
  const std::string item_separator = indent >= 0 ? "," : ", ";
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
      out += value.str();
      return;
    case Value::Kind::kString:
    case Value::Kind::kFunction:
      out += nlohmann::json(value.as_string()).dump();  // escapes as json.dumps(ensure_ascii=False)
      return;
    case Value::Kind::kList: {
      out += '[';
      const List& items = value.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_separator;
        newline(depth + 1);
        append_json(out, items[i], indent, depth + 1);
      }
      if (!items.empty()) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      out += '{';
      const Dict& entries = value.as_dict();
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_separator;
        newline(depth + 1);
        out += nlohmann::json(entries[i].first).dump() + ": ";
        append_json(out, entries[i].second, indent, depth + 1);
      }
      if (!entries.empty()) newline(depth);
      out += '}';
      return;
    }
  }
}

}  // namespace

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool value) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = value;
  return v;
}

Value Value::integer(int64_t value) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = value;
  return v;
}

Value Value::real(double value) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.real_ = value;
  return v;
}

Value Value::string(std::string value) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::make_shared<const std::string>(std::move(value));
  return v;
}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict(Dict entries) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>(std::move(entries));
  return v;
}

Value Value::namespace_of(Dict entries) {
  Value v = dict(std::move(entries));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::function(std::string name) {
  Value v = string(std::move(name));
  v.kind_ = Kind::kFunction;
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return real(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& item : json) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict entries;
      for (const auto& [key, item] : json.items()) entries.emplace_back(key, from_json(item));
      return dict(std::move(entries));
    }
    default:
      return Value();
  }
}

Value Value::get(const std::string& key) const {
  if (!dict_) return Value();
  for (const auto& [name, value] : *dict_) {
    if (name == key) return value;
  }
  return Value();
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return real_ != 0;
    case Kind::kString:
      return !string_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return bool_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return float_text(real_);
    case Kind::kString:
      return *string_;
    case Kind::kFunction:
      return "<function " + *string_ + ">";
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + repr((*list_)[i]);
      return out + "]";
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        out += (i ? ", " : "") + string_repr((*dict_)[i].first) + ": " + repr((*dict_)[i].second);
      }
      return out + "}";
    }
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "namespace";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) return as_double() == other.as_double();
  if (kind_ == Kind::kBool && other.is_number()) return (bool_ ? 1.0 : 0.0) == other.as_double();
  if (is_number() && other.kind_ == Kind::kBool) return other.equals(*this);
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return bool_ == other.bool_;
    case Kind::kString:
    case Kind::kFunction:
      return *string_ == *other.string_;
    case Kind::kList: {
      if (list_->size() != other.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].equals((*other.list_)[i])) return false;
      }
      return true;
    }
    default: {
      if (dict_ == other.dict_) return true;
      if (dict_->size() != other.dict_->size()) return false;
      for (const auto& [key, value] : *dict_) {
        if (!other.get(key).equals(value)) return false;
      }
      return true;
    }
  }
}

std::string to_json(const Value& value, int indent) {
  std::string out;
  append_json(out, value, indent, 0);
  return out;
}

}  // namespace ptrain::jinja
