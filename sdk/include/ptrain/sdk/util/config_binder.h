// One declaration per config key: a ConfigBinder ties each key of a section
// to a field of the typed struct it is read into, so the same line gives
//   - the schema (ConfigSchema: type, default, bounds, choices, doc), which
//     the core validates TOML against, documents (`ptrain schema`,
//     `ptrain plugins --describe`) and reports errors from;
//   - the reader: validated ConfigValues → the struct, choices → enums;
//   - the writer: the struct → (key, value) pairs, as the resolved
//     config.toml lists them.
//
//   struct OptimSection { OptimizerKind name; double lr; std::optional<double> eps; };
//   const sdk::ConfigBinder<OptimSection> binder = sdk::ConfigBinder<OptimSection>()
//       .choice("name", &OptimSection::name, kOptimizers, OptimizerKind::kAdamW, "optimizer")
//       .key("lr", &OptimSection::lr, 1e-4, "peak learning rate", sdk::above(0.0))
//       .key("eps", &OptimSection::eps, sdk::unset, "denominator epsilon", sdk::above(0.0));
//
// A field is a member pointer or a generic callable returning a reference to
// it (for nested structs: [](auto& c) -> auto& { return c.sampling.top_p; }),
// called with the struct and with a const one.
// Field types: bool, integers, double, std::string, std::vector<std::string>,
// std::vector<double>, an enum (through choice()), a std::vector of an enum,
// or std::optional of a scalar. A key declared `unset` may stay unset: its
// std::optional field stays empty; a plain field keeps its default-constructed
// value and is left out of write() while it holds it.
//
// Checks that involve several keys stay with the reader of the section
// (they need the values' locations for their errors): read(), then check.
#pragma once

#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/errors.h"

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ptrain::sdk {

// The range a number key must lie in (every element, for a list).
struct Bounds {
  std::optional<double> min;
  bool min_exclusive = false;
  std::optional<double> max;
  bool max_exclusive = false;

  constexpr Bounds at_most(double value) const { return {min, min_exclusive, value, false}; }
  constexpr Bounds below(double value) const { return {min, min_exclusive, value, true}; }
};
constexpr Bounds at_least(double value) { return {value, false, std::nullopt, false}; }
constexpr Bounds above(double value) { return {value, true, std::nullopt, false}; }
constexpr Bounds at_most(double value) { return Bounds{}.at_most(value); }
constexpr Bounds between(double low, double high) { return at_least(low).at_most(high); }

// Default markers: the key must be set, or may stay unset.
struct RequiredKey {};
struct UnsetKey {};
inline constexpr RequiredKey required{};
inline constexpr UnsetKey unset{};

// The allowed spellings of a choice key and the enum value each reads as.
template <class E>
using Choices = std::vector<std::pair<std::string, E>>;

// The spelling of `value`; throws ConfigError if `choices` lacks it (a bug
// in the table, not in a user's config).
template <class E>
const std::string& choice_name(const Choices<E>& choices, E value) {
  for (const auto& [name, choice] : choices) {
    if (choice == value) return name;
  }
  throw ConfigError("a choice table lacks the value " + std::to_string(static_cast<long long>(value)));
}

namespace binder_detail {

template <class T>
struct IsOptional : std::false_type {
  using Value = T;
};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {
  using Value = T;
};
template <class T>
struct IsVector : std::false_type {
  using Element = void;
};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {
  using Element = T;
};

// The field a binding writes, given the config struct and a member pointer or accessor.
template <class Config, class Field>
using FieldType = std::remove_reference_t<std::invoke_result_t<Field, Config&>>;
// Its value type: the field's, or the optional's inner type.
template <class Config, class Field>
using ValueOf = typename IsOptional<FieldType<Config, Field>>::Value;

// The schema type and the ConfigValue alternative of a (non-optional) field type.
template <class V>
constexpr ValueType value_type_of() {
  if constexpr (std::is_same_v<V, bool>) {
    return ValueType::kBool;
  } else if constexpr (std::is_integral_v<V>) {
    return ValueType::kInt;
  } else if constexpr (std::is_floating_point_v<V>) {
    return ValueType::kFloat;
  } else if constexpr (std::is_same_v<V, std::string>) {
    return ValueType::kString;
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    return ValueType::kStringList;
  } else {
    static_assert(std::is_same_v<V, std::vector<double>>, "unsupported config field type");
    return ValueType::kFloatList;
  }
}

template <class V>
ConfigValue to_config_value(const V& value) {
  if constexpr (std::is_same_v<V, bool> || std::is_floating_point_v<V> || std::is_same_v<V, std::string> ||
                std::is_same_v<V, std::vector<std::string>> || std::is_same_v<V, std::vector<double>>) {
    return ConfigValue(value);
  } else {
    return ConfigValue(static_cast<int64_t>(value));
  }
}

template <class V>
V from_config_value(const ConfigValue& value) {
  if constexpr (value_type_of<V>() == ValueType::kInt) {
    return static_cast<V>(std::get<int64_t>(value));
  } else if constexpr (value_type_of<V>() == ValueType::kFloat) {
    return static_cast<V>(std::get<double>(value));
  } else {
    return std::get<V>(value);
  }
}

inline void apply_bounds(ConfigKey& key, const Bounds& bounds) {
  key.min = bounds.min;
  key.min_exclusive = bounds.min_exclusive;
  key.max = bounds.max;
  key.max_exclusive = bounds.max_exclusive;
}

}  // namespace binder_detail

template <class Config>
class ConfigBinder {
 public:
  // A key read as is into `field` (bool, integer, float, string, or a list
  // of strings or floats; each possibly std::optional). `default_value` is a
  // value of the field's type, `sdk::required` or `sdk::unset`.
  template <class Field, class Default>
  ConfigBinder& key(std::string name, Field field, const Default& default_value, std::string doc,
                    Bounds bounds = {}) {
    using Stored = binder_detail::FieldType<Config, Field>;
    using V = binder_detail::ValueOf<Config, Field>;
    ConfigKey spec = new_key<V>(std::move(name), default_value, std::move(doc));
    spec.type = binder_detail::value_type_of<V>();
    binder_detail::apply_bounds(spec, bounds);
    return add(std::move(spec), /*omit_blank=*/true,
               [field](Config& config, const ConfigValue& value, const std::string&) {
                 std::invoke(field, config) = binder_detail::from_config_value<V>(value);
               },
               [field](const Config& config) -> std::optional<ConfigValue> {
                 const Stored& stored = std::invoke(field, config);
                 if constexpr (binder_detail::IsOptional<Stored>::value) {
                   if (!stored) return std::nullopt;
                   return binder_detail::to_config_value(*stored);
                 } else {
                   return binder_detail::to_config_value(stored);
                 }
               });
  }

  // A string key (or list of strings) whose allowed spellings read as enum
  // values: `field` is an enum, or a std::vector of one.
  template <class Field, class E, class Default>
  ConfigBinder& choice(std::string name, Field field, Choices<E> choices, const Default& default_value,
                       std::string doc) {
    using Stored = binder_detail::FieldType<Config, Field>;
    constexpr bool is_list = binder_detail::IsVector<Stored>::value;
    ConfigKey spec = new_key<Stored>(std::move(name), default_value, std::move(doc), &choices);
    spec.type = is_list ? ValueType::kStringList : ValueType::kString;
    for (const auto& [spelling, value] : choices) spec.choices.push_back(spelling);
    const std::string key_name = spec.name;
    return add(std::move(spec), /*omit_blank=*/false,
               [field, choices, key_name](Config& config, const ConfigValue& value, const std::string& where) {
                 if constexpr (is_list) {
                   Stored read;
                   for (const std::string& item : std::get<std::vector<std::string>>(value)) {
                     read.push_back(parse_choice(choices, item, key_name, where));
                   }
                   std::invoke(field, config) = std::move(read);
                 } else {
                   std::invoke(field, config) = parse_choice(choices, std::get<std::string>(value), key_name, where);
                 }
               },
               [field, choices](const Config& config) -> std::optional<ConfigValue> {
                 return spell(choices, std::invoke(field, config));
               });
  }

  // Adds every key to `schema` (PluginInfo::declare_config hands one over).
  void declare(ConfigSchema& schema) const {
    for (const Binding& binding : bindings_) schema.add_key(binding.spec);
  }
  ConfigSchema schema() const {
    ConfigSchema schema;
    declare(schema);
    return schema;
  }

  // Fills `config` from validated values, which hold every key that has a
  // value (set or defaulted); a key without one leaves its field as it is.
  void read_into(const ConfigValues& values, Config& config) const {
    for (const Binding& binding : bindings_) {
      const std::string& name = binding.spec.name;
      if (values.has(name)) binding.read(config, values.entries().at(name).value, values.where(name));
    }
  }
  Config read(const ConfigValues& values) const {
    Config config{};
    read_into(values, config);
    return config;
  }
  // Every key at its default (tools and tests that build a module without a config file).
  Config defaults() const { return read(ConfigValues::defaults_of(schema(), "")); }

  // (key, value) of every key that holds a value, in declaration order.
  std::vector<std::pair<std::string, ConfigValue>> write(const Config& config) const {
    std::vector<std::pair<std::string, ConfigValue>> written;
    for (const Binding& binding : bindings_) {
      std::optional<ConfigValue> value = binding.write(config);
      if (value && binding.leaves_out(*value)) value.reset();
      if (value) written.emplace_back(binding.spec.name, std::move(*value));
    }
    return written;
  }

 private:
  struct Binding {
    ConfigKey spec;
    std::function<void(Config&, const ConfigValue&, const std::string& where)> read;
    std::function<std::optional<ConfigValue>(const Config&)> write;
    std::optional<ConfigValue> unset_value;  // what an unset key's plain field holds while unset

    bool leaves_out(const ConfigValue& value) const { return unset_value && value == *unset_value; }
  };

  // The name, doc and default of a key whose field (or, for optional fields,
  // whose value) has type V.
  template <class V, class Default, class E = int>
  static ConfigKey new_key(std::string name, const Default& default_value, std::string doc,
                           const Choices<E>* choices = nullptr) {
    ConfigKey spec;
    spec.name = std::move(name);
    spec.doc = std::move(doc);
    if constexpr (std::is_same_v<Default, RequiredKey>) {
      spec.required = true;
    } else if constexpr (!std::is_same_v<Default, UnsetKey>) {
      if constexpr (std::is_enum_v<V>) {
        spec.default_value = choice_name(*choices, static_cast<V>(default_value));
      } else if constexpr (binder_detail::IsVector<V>::value &&
                           std::is_enum_v<typename binder_detail::IsVector<V>::Element>) {
        std::vector<std::string> names;
        for (const auto value : default_value) names.push_back(choice_name(*choices, value));
        spec.default_value = std::move(names);
      } else {
        spec.default_value = binder_detail::to_config_value(static_cast<V>(default_value));
      }
    }
    return spec;
  }

  // omit_blank: a plain field of an unset key is left out of write() while
  // it holds its default-constructed value (an empty path, a zero count).
  ConfigBinder& add(ConfigKey spec, bool omit_blank,
                    std::function<void(Config&, const ConfigValue&, const std::string&)> read,
                    std::function<std::optional<ConfigValue>(const Config&)> write) {
    for (const Binding& binding : bindings_) {
      if (binding.spec.name == spec.name) throw ConfigError("config binder declares key '" + spec.name + "' twice");
    }
    Binding binding{std::move(spec), std::move(read), std::move(write), std::nullopt};
    if (omit_blank && !binding.spec.default_value && !binding.spec.required) {
      Config blank{};
      binding.unset_value = binding.write(blank);
    }
    bindings_.push_back(std::move(binding));
    return *this;
  }

  // Validated values hold allowed spellings only; values built by hand may not.
  template <class E>
  static E parse_choice(const Choices<E>& choices, const std::string& spelling, const std::string& key_name,
                        const std::string& where) {
    std::string allowed;
    for (const auto& [name, value] : choices) {
      if (name == spelling) return value;
      allowed += (allowed.empty() ? "" : ", ") + name;
    }
    throw ConfigError(where + ": unknown " + key_name + " '" + spelling + "' (expected one of: " + allowed + ")");
  }

  template <class E, class Stored>
  static ConfigValue spell(const Choices<E>& choices, const Stored& stored) {
    if constexpr (binder_detail::IsVector<Stored>::value) {
      std::vector<std::string> names;
      for (const E value : stored) names.push_back(choice_name(choices, value));
      return ConfigValue(std::move(names));
    } else {
      return ConfigValue(choice_name(choices, stored));
    }
  }

  std::vector<Binding> bindings_;
};

}  // namespace ptrain::sdk
