// GRPO's reward functions: the SDK's built-in ones (sdk/util/builtin_rewards.h)
// with the plugin's settings, reward libraries' functions, Python functions
// and reward servers, and reward models (grpo_reward_models.h).
#pragma once

#include "grpo_config.h"

#include "ptrain/sdk/context.h"
#include "ptrain/sdk/rewards.h"
#include "ptrain/sdk/util/builtin_rewards.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::grpo {

// The built-in rewards' settings: answer_field, format_pattern,
// max_completion_length and overlong_cache.
sdk::BuiltinRewardSettings builtin_reward_settings(const GrpoConfig& config);

// Throws sdk::ConfigError naming module.reward_funcs for a python: entry
// that is not python:FILE.py:FUNCTION (the file and function are checked
// when setup() opens them).
void check_reward_source(const sdk::ConfigValues& values, const std::string& entry, const sdk::RewardSource& source);

// The functions of config.reward_funcs, in order: a python: or http:// entry
// makes the function the core opens from it; a built-in name makes the
// built-in, any other name the function of that name in one of the reward
// libraries of config.reward_plugins, which the core opens and checks
// (Context::open_reward_library). Throws sdk::ConfigError naming the key for
// a name that no source or more than one offers; sdk::PluginError (from the
// core, prefixed with the key's location) for a library it refuses.
std::vector<std::unique_ptr<sdk::RewardFunction>> make_reward_functions(sdk::Context& ctx, const GrpoConfig& config);

}  // namespace ptrain::grpo
