// Names in config errors: full key names, and the "did you mean" hint for a
// key or section the schema does not know.
#pragma once

#include "ptrain/sdk/config_schema.h"

#include <optional>
#include <string>
#include <vector>

namespace ptrain::config {

inline constexpr const char* kModuleSection = "module";
inline constexpr const char* kDefaultLocation = "default";

// "section.key", or "key" at the top level.
std::string full_name(const std::string& section, const std::string& key);

std::string join(const std::vector<std::string>& items, const std::string& separator);

// The candidate `name` is most likely a typo of: at most 2 edits (1 for short
// names, so "lr" does not suggest "eps"), or a prefix of at least 3
// characters ("optimizer" → "optim"); nullopt when none is that close.
std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& candidates);

// " (did you mean 'micro_size'?)", " (did you mean 'optim.lr'?)" for a key
// that lives in another section or has another name in transformers/TRL, or
// the list of keys the section does have.
std::string unknown_key_hint(const std::string& section, const std::string& key, const sdk::ConfigSchema& schema);

}  // namespace ptrain::config
