// The config reference as Markdown (docs/config.md) and as plain text
// (`ptrain plugins --describe`), written from the schemas themselves so
// neither can drift from what the validator accepts.
#pragma once

#include "ptrain/sdk/config_schema.h"

#include <string>
#include <utility>
#include <vector>

namespace ptrain::config {

// One table per section: key, type, default, allowed values, description.
std::string schema_markdown(const std::vector<std::pair<std::string, sdk::ConfigSchema>>& sections);

// Two lines per key: "  name  type, default D[, allowed: a, b | ≥ x]" and its doc, indented.
std::string schema_text(const sdk::ConfigSchema& schema);

}  // namespace ptrain::config
