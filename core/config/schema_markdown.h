// The config reference as Markdown, written from the schemas themselves so
// docs/config.md cannot drift from what the validator accepts.
#pragma once

#include "ptrain/sdk/config_schema.h"

#include <string>
#include <utility>
#include <vector>

namespace ptrain::config {

// One table per section: key, type, default, allowed values, description.
std::string schema_markdown(const std::vector<std::pair<std::string, sdk::ConfigSchema>>& sections);

}  // namespace ptrain::config
