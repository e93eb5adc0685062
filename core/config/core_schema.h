// The schema of every core config section (DESIGN.md §8).
//
// The same sdk::ConfigSchema type plugins use for [module], so every key gets
// the same checks (unknown key with did-you-mean, type, range, choices).
// Checks that involve more than one key live in config_loader.cpp.
#pragma once

#include "ptrain/sdk/config_schema.h"

#include <string>
#include <utility>
#include <vector>

namespace ptrain::config {

// Section name → schema, in the order they are documented and written back.
// The first entry is the top level (name ""): plugin, seed, output_dir.
const std::vector<std::pair<std::string, sdk::ConfigSchema>>& core_sections();

// The schema of one core section, or nullptr if `name` is not one.
const sdk::ConfigSchema* find_core_section(const std::string& name);

}  // namespace ptrain::config
