// The core's config sections (docs/config.md), each key declared once with
// sdk::ConfigBinder: the schema the loader validates against and documents,
// the reader into RunConfig's typed sections and the writer of the resolved
// config.toml all come from that one declaration.
#pragma once

#include "core/config/run_config.h"
#include "ptrain/sdk/config_schema.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::config {

using KeyValues = std::vector<std::pair<std::string, sdk::ConfigValue>>;

struct CoreSection {
  std::string name;  // "" for the top level (plugin, seed, output_dir)
  sdk::ConfigSchema schema;
  // Validated values → the section's fields of `config`.
  std::function<void(const sdk::ConfigValues& values, RunConfig& config)> read;
  // The section's keys with a value, in declaration order.
  std::function<KeyValues(const RunConfig& config)> write;
};

// In the order they are documented and written back; the top level first.
const std::vector<CoreSection>& core_sections();

// The schema of one core section, or nullptr if `name` is not one.
const sdk::ConfigSchema* find_core_section(const std::string& name);

// runtime.precision as a config spells it ("fp32", "bf16-mixed").
const std::string& precision_name(Precision precision);

// [model] keys that describe a model built from scratch: with model.init
// they come from its config.json instead.
const std::vector<std::string>& model_size_keys();

}  // namespace ptrain::config
