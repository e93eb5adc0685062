// TOML nodes and config values: what a node holds, described for error
// messages, and the values of --set overrides parsed and written into the
// document. Internal to core/config (the only code that sees toml++).
#pragma once

#include "ptrain/sdk/config_schema.h"

#include <toml++/toml.h>

#include <optional>
#include <string>

namespace ptrain::config {

// "string \"abc\"", "integer 3", "a table": what the user wrote, for messages.
std::string describe_node(const toml::node& node);

// The value of a --set override parsed as TOML; nullopt when the text is not
// a single TOML value (the caller then takes it as a string).
std::optional<sdk::ConfigValue> parse_override_value(const std::string& text);

// Letters, digits, '_' and '-': a key TOML accepts unquoted.
bool is_bare_key(const std::string& key);

// Sets table[key] to `value` (a list as a TOML array).
void insert_value(toml::table& table, const std::string& key, const sdk::ConfigValue& value);

}  // namespace ptrain::config
