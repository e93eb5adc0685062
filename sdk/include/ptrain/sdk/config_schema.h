// A typed description of one config section, and the validated values read with it.
//
// The core describes its own sections with the same schema type that plugins
// export for `[module]`, so every key gets the same checks: unknown keys (with
// a did-you-mean), wrong types, ranges and choices, each error naming
// file:line and the key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ptrain::sdk {

// kStringList and kFloatList are TOML arrays (`loss = ["sigmoid", "sft"]`); a
// single value of the element type reads as a one-element list.
enum class ValueType { kBool, kInt, kFloat, kString, kStringList, kFloatList };

using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>, std::vector<double>>;

const char* value_type_name(ValueType type);
std::string format_config_value(const ConfigValue& value);  // as it would be written in TOML

struct ConfigKey {
  std::string name;
  ValueType type = ValueType::kString;
  std::optional<ConfigValue> default_value;  // nullopt: the key may stay unset (see `required`)
  bool required = false;                     // unset is an error
  std::string doc;                           // one line, shown by `ptrain validate --schema` and docs
  std::optional<double> min;                 // bounds for kInt and kFloat (each element of kFloatList)
  bool min_exclusive = false;                // min itself is not allowed (e.g. lr > 0)
  std::optional<double> max;
  bool max_exclusive = false;
  std::vector<std::string> choices;  // allowed values for kString (each element of kStringList; empty: any)
};

// The keys of a section. Plugins declare theirs through sdk::ConfigBinder
// (ptrain/sdk/util/config_binder.h), which also reads them into a struct.
class ConfigSchema {
 public:
  // Throws ConfigError if a key of that name was added before.
  ConfigSchema& add_key(ConfigKey key);
  ConfigSchema& add_bool(const std::string& name, bool default_value, const std::string& doc);
  ConfigSchema& add_int(const std::string& name, std::optional<int64_t> default_value, const std::string& doc,
                        std::optional<int64_t> min = std::nullopt, std::optional<int64_t> max = std::nullopt);
  ConfigSchema& add_float(const std::string& name, std::optional<double> default_value, const std::string& doc,
                          std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
  ConfigSchema& add_string(const std::string& name, std::optional<std::string> default_value, const std::string& doc,
                           std::vector<std::string> choices = {});
  ConfigSchema& add_string_list(const std::string& name, std::optional<std::vector<std::string>> default_value,
                                const std::string& doc, std::vector<std::string> choices = {});
  ConfigSchema& add_float_list(const std::string& name, std::optional<std::vector<double>> default_value,
                               const std::string& doc, std::optional<double> min = std::nullopt,
                               std::optional<double> max = std::nullopt);
  // Marks the most recently added key as required.
  ConfigSchema& required();

  const std::vector<ConfigKey>& keys() const { return keys_; }
  const ConfigKey* find(const std::string& name) const;

 private:
  std::vector<ConfigKey> keys_;
};

// Values of one section after validation against its schema: every key of the
// schema that has a value (set by the user or defaulted) is present and of the
// declared type.
class ConfigValues {
 public:
  struct Entry {
    ConfigValue value;
    std::string location;  // "file:line" where the user set it, or "default"
    bool set_by_user = false;
  };

  ConfigValues() = default;
  explicit ConfigValues(std::string section) : section_(std::move(section)) {}
  // Every key of `schema` that has a default, at its default (tests and
  // tools that build a module without a config file start here).
  static ConfigValues defaults_of(const ConfigSchema& schema, std::string section);

  void set(const std::string& key, ConfigValue value, std::string location, bool set_by_user);

  bool has(const std::string& key) const;          // has a value (set or defaulted)
  bool set_by_user(const std::string& key) const;  // the user wrote it
  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::string>& get_string_list(const std::string& key) const;
  const std::vector<double>& get_float_list(const std::string& key) const;

  // "file:line: key 'section.key'" — the prefix of an error about this key.
  std::string where(const std::string& key) const;
  const std::string& section() const { return section_; }
  const std::map<std::string, Entry>& entries() const { return entries_; }

 private:
  const Entry& entry(const std::string& key) const;
  std::string section_;
  std::map<std::string, Entry> entries_;
};

}  // namespace ptrain::sdk
