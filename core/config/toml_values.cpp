#include "core/config/toml_values.h"

#include <algorithm>
#include <cctype>
#include <type_traits>
#include <variant>

namespace ptrain::config {
namespace {

// An array of strings or of numbers as a list value; nullopt for other arrays
// (mixed, nested). An empty array is an empty list of either type.
std::optional<sdk::ConfigValue> array_value(const toml::array& array) {
  if (array.empty() || array.is_homogeneous(toml::node_type::string)) {
    std::vector<std::string> strings;
    for (const toml::node& item : array) strings.emplace_back(item.as_string()->get());
    return sdk::ConfigValue(std::move(strings));
  }
  std::vector<double> numbers;
  for (const toml::node& item : array) {
    if (const auto* integer = item.as_integer()) {
      numbers.push_back(static_cast<double>(integer->get()));
    } else if (const auto* floating = item.as_floating_point()) {
      numbers.push_back(floating->get());
    } else {
      return std::nullopt;
    }
  }
  return sdk::ConfigValue(std::move(numbers));
}

}  // namespace

// "string \"abc\"", "integer 3", "table" — what the user wrote, for messages.
std::string describe_node(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "string " + sdk::format_config_value(std::string(node.as_string()->get()));
    case toml::node_type::integer: return "integer " + std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point: return "float " + sdk::format_config_value(node.as_floating_point()->get());
    case toml::node_type::boolean: return std::string("bool ") + (node.as_boolean()->get() ? "true" : "false");
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

// Parses the value of a --set override as TOML; nullopt if it is not a single
// scalar TOML value (then the caller takes the text as a string).
std::optional<sdk::ConfigValue> parse_override_value(const std::string& text) {
  try {
    toml::table parsed = toml::parse("v = " + text);
    if (parsed.size() != 1) return std::nullopt;
    const toml::node* node = parsed.get("v");
    if (!node) return std::nullopt;
    switch (node->type()) {
      case toml::node_type::boolean: return sdk::ConfigValue(node->as_boolean()->get());
      case toml::node_type::integer: return sdk::ConfigValue(node->as_integer()->get());
      case toml::node_type::floating_point: return sdk::ConfigValue(node->as_floating_point()->get());
      case toml::node_type::string: return sdk::ConfigValue(std::string(node->as_string()->get()));
      case toml::node_type::array: return array_value(*node->as_array());
      default: return std::nullopt;
    }
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

bool is_bare_key(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

void insert_value(toml::table& table, const std::string& key, const sdk::ConfigValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<std::string>> || std::is_same_v<T, std::vector<double>>) {
          toml::array array;
          for (const auto& item : v) array.push_back(item);
          table.insert_or_assign(key, std::move(array));
        } else {
          table.insert_or_assign(key, v);
        }
      },
      value);
}

}  // namespace ptrain::config
