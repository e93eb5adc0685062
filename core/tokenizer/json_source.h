// The tokenizer.json being read: every error a loader raises starts with its
// name, so the user knows which file to fix.
#pragma once

#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <string>

namespace ptrain::tokenizer::detail {

struct JsonSource {
  std::string name;

  [[noreturn]] void fail(const std::string& message) const { throw sdk::ConfigError(name + ": " + message); }
};

inline std::string json_type(const nlohmann::json& value) { return value.type_name(); }

}  // namespace ptrain::tokenizer::detail
