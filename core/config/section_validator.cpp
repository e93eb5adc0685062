#include "core/config/section_validator.h"

#include "core/config/core_sections.h"
#include "core/config/key_suggestions.h"
#include "core/config/toml_values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace ptrain::config {

using sdk::ConfigKey;
using sdk::ConfigValue;
using sdk::ValueType;

namespace {

std::string article(ValueType type) { return type == ValueType::kInt ? "an" : "a"; }

// An inclusive bound as the key's type writes it ("1", "1.0"); an exclusive
// one as the number alone ("> 0", "< 1").
std::string format_bound(ValueType type, double bound, bool exclusive) {
  if (type == ValueType::kInt) return std::to_string(static_cast<int64_t>(bound));
  if (!exclusive) return sdk::format_config_value(bound);
  char text[32];
  std::snprintf(text, sizeof text, "%g", bound);
  return text;
}

std::optional<std::string> range_violation(const ConfigKey& spec, double number) {
  if (!std::isfinite(number)) return "must be a finite number";
  if (spec.min && (spec.min_exclusive ? !(number > *spec.min) : number < *spec.min)) {
    return std::string(spec.min_exclusive ? "must be > " : "must be >= ") +
           format_bound(spec.type, *spec.min, spec.min_exclusive);
  }
  if (spec.max && (spec.max_exclusive ? !(number < *spec.max) : number > *spec.max)) {
    return std::string(spec.max_exclusive ? "must be < " : "must be <= ") +
           format_bound(spec.type, *spec.max, spec.max_exclusive);
  }
  return std::nullopt;
}

std::string choice_violation(const ConfigKey& spec, const std::string& text) {
  std::vector<std::string> quoted;
  for (const auto& choice : spec.choices) quoted.push_back(sdk::format_config_value(choice));
  std::string message = "expected one of " + join(quoted, ", ") + ", got " + sdk::format_config_value(text);
  if (auto match = closest(text, spec.choices)) message += " (did you mean \"" + *match + "\"?)";
  return message;
}

}  // namespace

sdk::ConfigValues SectionValidator::validate(const std::string& section, const sdk::ConfigSchema& schema,
                                             const toml::table* table) {
  sdk::ConfigValues values(section);
  std::set<std::string> seen;  // present in the file, valid or not: neither defaulted nor "missing"
  if (table) {
    for (auto&& [key, node] : *table) {
      const std::string key_name(key.str());
      const std::string name = full_name(section, key_name);
      const std::string loc = config_.location(name, key, node);
      // At the top level, tables are sections and are handled by the caller.
      if (section.empty() && node.is_table()) continue;
      const ConfigKey* spec = schema.find(key_name);
      if (!spec) {
        if (section.empty() && (find_core_section(key_name) || key_name == kModuleSection)) {
          problems_.add(loc, "'" + key_name + "' is a section; write it as [" + key_name + "], got " +
                                 describe_node(node));
        } else {
          problems_.add(loc, "unknown key '" + name + "'" + unknown_key_hint(section, key_name, schema));
        }
        continue;
      }
      seen.insert(key_name);
      if (auto value = convert(*spec, name, loc, node)) values.set(key_name, std::move(*value), loc, true);
    }
  }
  for (const auto& spec : schema.keys()) {
    if (seen.count(spec.name)) continue;
    if (spec.required) {
      problems_.add(config_.file_name(),
                    "missing required key '" + full_name(section, spec.name) + "' (" + spec.doc + ")");
    } else if (spec.default_value) {
      values.set(spec.name, *spec.default_value, kDefaultLocation, false);
    }
  }
  return values;
}

std::optional<ConfigValue> SectionValidator::convert(const ConfigKey& spec, const std::string& name,
                                                     const std::string& loc, const toml::node& node) {
  if (spec.type == ValueType::kStringList || spec.type == ValueType::kFloatList) {
    return convert_list(spec, name, loc, node);
  }
  const std::string prefix = "key '" + name + "': ";
  std::optional<ConfigValue> value = typed_scalar(spec.type, name, node);
  if (!value) {
    problems_.add(loc, prefix + "expected " + article(spec.type) + " " + sdk::value_type_name(spec.type) + ", got " +
                           describe_node(node));
    return std::nullopt;
  }
  if (const auto why = violation(spec, *value)) {
    problems_.add(loc, prefix + *why);
    return std::nullopt;
  }
  return value;
}

std::optional<ConfigValue> SectionValidator::typed_scalar(ValueType type, const std::string& name,
                                                          const toml::node& node) const {
  switch (type) {
    case ValueType::kBool:
      if (node.is_boolean()) return ConfigValue(node.as_boolean()->get());
      break;
    case ValueType::kInt:
      if (node.is_integer()) return ConfigValue(node.as_integer()->get());
      break;
    case ValueType::kFloat:
      // An integer is a float the user wrote without a '.', e.g. lr = 1.
      if (node.is_floating_point()) return ConfigValue(node.as_floating_point()->get());
      if (node.is_integer()) return ConfigValue(static_cast<double>(node.as_integer()->get()));
      break;
    case ValueType::kString:
      if (node.is_string()) return ConfigValue(std::string(node.as_string()->get()));
      // --set output_dir=2024 means the string "2024".
      if (const auto it = config_.overrides.find(name); it != config_.overrides.end()) return ConfigValue(it->second.raw);
      break;
    case ValueType::kStringList:
    case ValueType::kFloatList: break;  // convert_list
  }
  return std::nullopt;
}

std::optional<std::string> SectionValidator::violation(const ConfigKey& spec, const ConfigValue& value) const {
  if (spec.type == ValueType::kInt || spec.type == ValueType::kFloat) {
    const double number =
        spec.type == ValueType::kInt ? static_cast<double>(std::get<int64_t>(value)) : std::get<double>(value);
    if (auto why = range_violation(spec, number)) return *why + ", got " + sdk::format_config_value(value);
  }
  if (spec.type == ValueType::kString && !spec.choices.empty()) {
    const auto& text = std::get<std::string>(value);
    if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
      return choice_violation(spec, text);
    }
  }
  return std::nullopt;
}

// A TOML array whose elements each pass the element type's checks (an error
// names the element: key 'module.loss[1]', at the element's line). A single
// value of the element type is a one-element list, so `loss = "sigmoid"` and
// `--set module.loss=ipo` work.
std::optional<ConfigValue> SectionValidator::convert_list(const ConfigKey& spec, const std::string& name,
                                                          const std::string& loc, const toml::node& node) {
  const bool strings = spec.type == ValueType::kStringList;
  ConfigKey element = spec;
  element.type = strings ? ValueType::kString : ValueType::kFloat;
  const toml::array* array = node.as_array();
  if (!array) {
    const bool scalar = strings ? node.is_string() || config_.overrides.count(name) != 0 : node.is_number();
    if (!scalar) {
      problems_.add(loc, "key '" + name + "': expected a " + sdk::value_type_name(spec.type) +
                             " (a TOML array like " + (strings ? "[\"a\", \"b\"]" : "[1.0, 0.5]") + "), got " +
                             describe_node(node));
      return std::nullopt;
    }
    std::optional<ConfigValue> value = convert(element, name, loc, node);
    if (!value) return std::nullopt;
    if (strings) return ConfigValue(std::vector<std::string>{std::get<std::string>(*value)});
    return ConfigValue(std::vector<double>{std::get<double>(*value)});
  }
  std::vector<std::string> string_items;
  std::vector<double> number_items;
  bool valid = true;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& item = *array->get(i);
    const auto line = item.source().begin.line;
    const std::string item_loc =
        line > 0 && config_.overrides.count(name) == 0 ? config_.file_name() + ":" + std::to_string(line) : loc;
    std::optional<ConfigValue> value = convert(element, name + "[" + std::to_string(i) + "]", item_loc, item);
    if (!value) {
      valid = false;
    } else if (strings) {
      string_items.push_back(std::get<std::string>(*value));
    } else {
      number_items.push_back(std::get<double>(*value));
    }
  }
  if (!valid) return std::nullopt;
  return strings ? ConfigValue(std::move(string_items)) : ConfigValue(std::move(number_items));
}

}  // namespace ptrain::config
