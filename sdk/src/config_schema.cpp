// ConfigSchema builders and ConfigValues accessors.
//
// No TOML parser here: this file is part of the SDK library every plugin
// links, and plugins only describe and read values; the core does the parsing.
#include "ptrain/sdk/config_schema.h"

#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ptrain::sdk {

namespace {

// The name a value's alternative has in error messages; matches value_type_name.
const char* held_type_name(const ConfigValue& value) {
  switch (value.index()) {
    case 0: return value_type_name(ValueType::kBool);
    case 1: return value_type_name(ValueType::kInt);
    case 2: return value_type_name(ValueType::kFloat);
    case 3: return value_type_name(ValueType::kString);
    case 4: return value_type_name(ValueType::kStringList);
    default: return value_type_name(ValueType::kFloatList);
  }
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string quote_toml_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        // TOML forbids raw control characters (U+0000–U+001F, U+007F) in basic strings.
        if (byte < 0x20 || byte == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(byte));
          out += buf;
        } else {
          out += c;  // UTF-8 continuation bytes pass through unchanged
        }
    }
  }
  out += '"';
  return out;
}

// The shortest text that parses back to the same double, in Python's repr
// style (fixed for exponents -4..15, else scientific: 0.0001, 1e-05,
// 500000.0, 1e+16), made to read as a TOML float: "1" would re-parse as an
// integer, so it becomes "1.0".
std::string format_toml_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  int digits = 1;
  for (; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  const char* e = std::strchr(buf, 'e');
  const int exponent = e ? std::atoi(e + 1) : 0;
  if (exponent >= -4 && exponent < 16) {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, digits - 1 - exponent), value);
  }
  std::string text(buf);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kBool: return "bool";
    case ValueType::kInt: return "integer";
    case ValueType::kFloat: return "float";
    case ValueType::kString: return "string";
    case ValueType::kStringList: return "list of strings";
    case ValueType::kFloatList: return "list of numbers";
  }
  return "unknown";
}

std::string format_config_value(const ConfigValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* f = std::get_if<double>(&value)) return format_toml_float(*f);
  if (const auto* s = std::get_if<std::string>(&value)) return quote_toml_string(*s);
  std::string text = "[";
  const auto append = [&text](const std::string& item) { text += (text.size() > 1 ? ", " : "") + item; };
  if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
    for (const std::string& item : *strings) append(quote_toml_string(item));
  } else {
    for (const double item : std::get<std::vector<double>>(value)) append(format_toml_float(item));
  }
  return text + "]";
}

// ---- ConfigSchema ----

ConfigSchema& ConfigSchema::add_key(ConfigKey key) {
  // Two keys with one name would make the second unreachable; that is a bug
  // in whoever builds the schema, so say which key.
  if (find(key.name) != nullptr) throw ConfigError("config schema declares key '" + key.name + "' twice");
  keys_.push_back(std::move(key));
  return *this;
}

ConfigSchema& ConfigSchema::add_bool(const std::string& name, bool default_value, const std::string& doc) {
  ConfigKey key;
  key.name = name;
  key.type = ValueType::kBool;
  key.default_value = default_value;
  key.doc = doc;
  return add_key(std::move(key));
}

ConfigSchema& ConfigSchema::add_int(const std::string& name, std::optional<int64_t> default_value,
                                    const std::string& doc, std::optional<int64_t> min, std::optional<int64_t> max) {
  ConfigKey key;
  key.name = name;
  key.type = ValueType::kInt;
  if (default_value) key.default_value = *default_value;
  key.doc = doc;
  if (min) key.min = static_cast<double>(*min);
  if (max) key.max = static_cast<double>(*max);
  return add_key(std::move(key));
}

ConfigSchema& ConfigSchema::add_float(const std::string& name, std::optional<double> default_value,
                                      const std::string& doc, std::optional<double> min, std::optional<double> max) {
  ConfigKey key;
  key.name = name;
  key.type = ValueType::kFloat;
  if (default_value) key.default_value = *default_value;
  key.doc = doc;
  key.min = min;
  key.max = max;
  return add_key(std::move(key));
}

ConfigSchema& ConfigSchema::add_string(const std::string& name, std::optional<std::string> default_value,
                                       const std::string& doc, std::vector<std::string> choices) {
  ConfigKey key;
  key.name = name;
  key.type = ValueType::kString;
  if (default_value) key.default_value = std::move(*default_value);
  key.doc = doc;
  key.choices = std::move(choices);
  return add_key(std::move(key));
}

ConfigSchema& ConfigSchema::add_string_list(const std::string& name,
                                            std::optional<std::vector<std::string>> default_value,
                                            const std::string& doc, std::vector<std::string> choices) {
  add_string(name, std::nullopt, doc, std::move(choices));
  keys_.back().type = ValueType::kStringList;
  if (default_value) keys_.back().default_value = std::move(*default_value);
  return *this;
}

ConfigSchema& ConfigSchema::add_float_list(const std::string& name, std::optional<std::vector<double>> default_value,
                                           const std::string& doc, std::optional<double> min,
                                           std::optional<double> max) {
  add_float(name, std::nullopt, doc, min, max);
  keys_.back().type = ValueType::kFloatList;
  if (default_value) keys_.back().default_value = std::move(*default_value);
  return *this;
}

ConfigSchema& ConfigSchema::required() {
  if (keys_.empty()) throw ConfigError("ConfigSchema::required() called before any key was added");
  keys_.back().required = true;
  return *this;
}

const ConfigKey* ConfigSchema::find(const std::string& name) const {
  for (const auto& key : keys_) {
    if (key.name == name) return &key;
  }
  return nullptr;
}

// ---- ConfigValues ----

void ConfigValues::set(const std::string& key, ConfigValue value, std::string location, bool set_by_user) {
  entries_[key] = Entry{std::move(value), std::move(location), set_by_user};
}

bool ConfigValues::has(const std::string& key) const { return entries_.count(key) != 0; }

bool ConfigValues::set_by_user(const std::string& key) const {
  const auto it = entries_.find(key);
  return it != entries_.end() && it->second.set_by_user;
}

const ConfigValues::Entry& ConfigValues::entry(const std::string& key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) {
    // Reading a key the schema did not declare (or an optional key without
    // checking has()) is a programming error; throw rather than crash.
    const std::string name = section_.empty() ? key : section_ + "." + key;
    throw ConfigError("config key '" + name + "' has no value (is it declared in the schema? check has() for optional keys)");
  }
  return it->second;
}

namespace {

template <class T>
const T& get_as(const ConfigValues& values, const ConfigValues::Entry& entry, const std::string& key,
                ValueType wanted) {
  if (const auto* v = std::get_if<T>(&entry.value)) return *v;
  throw ConfigError(values.where(key) + ": read as " + value_type_name(wanted) + " but holds a " +
                    held_type_name(entry.value) + " " + format_config_value(entry.value));
}

}  // namespace

bool ConfigValues::get_bool(const std::string& key) const {
  return get_as<bool>(*this, entry(key), key, ValueType::kBool);
}

int64_t ConfigValues::get_int(const std::string& key) const {
  return get_as<int64_t>(*this, entry(key), key, ValueType::kInt);
}

double ConfigValues::get_float(const std::string& key) const {
  return get_as<double>(*this, entry(key), key, ValueType::kFloat);
}

const std::string& ConfigValues::get_string(const std::string& key) const {
  return get_as<std::string>(*this, entry(key), key, ValueType::kString);
}

const std::vector<std::string>& ConfigValues::get_string_list(const std::string& key) const {
  return get_as<std::vector<std::string>>(*this, entry(key), key, ValueType::kStringList);
}

const std::vector<double>& ConfigValues::get_float_list(const std::string& key) const {
  return get_as<std::vector<double>>(*this, entry(key), key, ValueType::kFloatList);
}

std::string ConfigValues::where(const std::string& key) const {
  const std::string name = "key '" + (section_.empty() ? key : section_ + "." + key) + "'";
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.location.empty()) return name;
  return it->second.location + ": " + name;
}

ConfigValues ConfigValues::defaults_of(const ConfigSchema& schema, std::string section) {
  ConfigValues values(std::move(section));
  for (const ConfigKey& key : schema.keys()) {
    if (key.default_value) values.set(key.name, *key.default_value, "default", false);
  }
  return values;
}

}  // namespace ptrain::sdk
