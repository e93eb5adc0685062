// The reward sources a spec string names in place of a reward library
// (Context::open_reward_library): "python:FILE.py" (python_reward.h) and
// "http://host:port/path" (http_reward.h).
#pragma once

#include "ptrain/sdk/rewards.h"

#include <memory>
#include <string>

namespace ptrain::rewards {

inline constexpr const char* kPythonSpecPrefix = "python:";

// Whether `spec` starts with python:, http:// or https:// (the last refused
// when opened, with a reason).
bool is_reward_source_spec(const std::string& spec);

// Throws sdk::ConfigError naming the file or URL when the source cannot be
// opened (python_reward.h, http_endpoint.h).
std::unique_ptr<sdk::RewardLibrary> open_reward_source(const std::string& spec);

}  // namespace ptrain::rewards
