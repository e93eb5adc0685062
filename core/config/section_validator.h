// One section's TOML table checked against its schema: unknown keys (with a
// did-you-mean), types, ranges, choices and required keys, each error naming
// where the value came from; defaults fill what the user did not write.
// Internal to core/config.
#pragma once

#include "core/config/parsed_config.h"
#include "core/config/problem_list.h"
#include "ptrain/sdk/config_schema.h"

#include <optional>
#include <string>

namespace ptrain::config {

class SectionValidator {
 public:
  SectionValidator(const ParsedConfig& config, ProblemList& problems) : config_(config), problems_(problems) {}

  // `table` nullptr: the section is absent. Values that fail a check are
  // recorded as problems and left out.
  sdk::ConfigValues validate(const std::string& section, const sdk::ConfigSchema& schema, const toml::table* table);

 private:
  // The value of `node` as the key's type, after its checks; nullopt (and a
  // recorded problem) if it fails one.
  std::optional<sdk::ConfigValue> convert(const sdk::ConfigKey& spec, const std::string& name, const std::string& loc,
                                          const toml::node& node);
  std::optional<sdk::ConfigValue> convert_list(const sdk::ConfigKey& spec, const std::string& name,
                                               const std::string& loc, const toml::node& node);
  // The node as a bool, integer, float or string, without range or choice checks.
  std::optional<sdk::ConfigValue> typed_scalar(sdk::ValueType type, const std::string& name,
                                               const toml::node& node) const;
  // Why `value` is not allowed (range, finiteness, choices); nullopt if it is.
  std::optional<std::string> violation(const sdk::ConfigKey& spec, const sdk::ConfigValue& value) const;

  const ParsedConfig& config_;
  ProblemList& problems_;
};

}  // namespace ptrain::config
