#include "grpo_rewards.h"

#include "grpo_reward_models.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <regex>

namespace ptrain::grpo {
namespace {

// The function a python: or http:// entry names, opened by the core; its
// errors are prefixed with the key's location.
std::unique_ptr<sdk::RewardFunction> make_source_reward(sdk::Context& ctx, const sdk::RewardSource& source) {
  const std::string where = ctx.module_config().where("reward_funcs") + ": ";
  try {
    return ctx.open_reward_library(source.source)->create(source.function);
  } catch (const sdk::ConfigError& error) {
    throw sdk::ConfigError(where + error.what());
  } catch (const sdk::PluginError& error) {
    throw sdk::PluginError(where + error.what());
  }
}

}  // namespace

void check_reward_source(const sdk::ConfigValues& values, const std::string& entry, const sdk::RewardSource& source) {
  if (entry.rfind("python:", 0) != 0) return;
  const std::string file = source.source.substr(std::string("python:").size());
  const bool identifier =
      !source.function.empty() && std::isdigit(static_cast<unsigned char>(source.function[0])) == 0 &&
      std::all_of(source.function.begin(), source.function.end(),
                  [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
  if (file.size() <= 3 || file.compare(file.size() - 3, 3, ".py") != 0 || !identifier) {
    throw sdk::ConfigError(values.where("reward_funcs") + ": '" + entry +
                           "': expected python:FILE.py:FUNCTION (a Python file and the name of a function it defines)");
  }
}

sdk::BuiltinRewardSettings builtin_reward_settings(const GrpoConfig& config) {
  return {config.answer_field, config.format_pattern, config.max_completion_length, config.overlong_cache};
}

std::vector<std::unique_ptr<sdk::RewardFunction>> make_reward_functions(sdk::Context& ctx, const GrpoConfig& config) {
  const sdk::ConfigValues& values = ctx.module_config();
  std::vector<std::unique_ptr<sdk::RewardLibrary>> libraries;
  for (const std::string& name_or_path : config.reward_plugins) {
    try {
      libraries.push_back(ctx.open_reward_library(name_or_path));
    } catch (const sdk::ConfigError& error) {
      throw sdk::ConfigError(values.where("reward_plugins") + ": " + error.what());
    } catch (const sdk::PluginError& error) {
      throw sdk::PluginError(values.where("reward_plugins") + ": " + error.what());
    }
    for (size_t other = 0; other + 1 < libraries.size(); ++other) {
      if (libraries[other]->path() == libraries.back()->path()) {
        throw sdk::ConfigError(values.where("reward_plugins") + ": '" + config.reward_plugins[other] + "' and '" +
                               name_or_path + "' are the same library (" + libraries.back()->path() + ")");
      }
    }
  }
  const std::vector<std::string> builtins = sdk::builtin_reward_names();
  std::vector<std::unique_ptr<sdk::RewardFunction>> functions;
  for (const std::string& name : config.reward_funcs) {
    if (const std::optional<sdk::RewardSource> source = sdk::reward_source_of(name)) {
      functions.push_back(make_source_reward(ctx, *source));
      continue;
    }
    std::vector<std::string> sources;
    if (std::find(builtins.begin(), builtins.end(), name) != builtins.end()) sources.push_back("built in");
    const sdk::RewardLibrary* offering = nullptr;
    for (const auto& library : libraries) {
      const std::vector<std::string> offered = library->function_names();
      if (std::find(offered.begin(), offered.end(), name) != offered.end()) {
        sources.push_back("offered by " + library->path());
        offering = library.get();
      }
    }
    if (sources.size() > 1) {
      std::string list;
      for (const std::string& source : sources) list += (list.empty() ? "" : " and ") + source;
      throw sdk::ConfigError(values.where("reward_funcs") + ": reward function '" + name + "' is ambiguous: " + list +
                             "; rename it in the library");
    }
    if (offering != nullptr) {
      functions.push_back(offering->create(name));
    } else if (!sources.empty()) {
      functions.push_back(sdk::make_builtin_reward(name, builtin_reward_settings(config)));
    } else {
      std::string known;
      for (const std::string& builtin : builtins) known += (known.empty() ? "" : ", ") + builtin;
      for (const auto& library : libraries) {
        for (const std::string& offered : library->function_names()) known += ", " + offered;
      }
      throw sdk::ConfigError(values.where("reward_funcs") + ": unknown reward function '" + name +
                             "'; the built-in ones and those of module.reward_plugins are " + known);
    }
  }
  for (auto& reward : make_reward_model_rewards(ctx, config.reward_models, config.generation_batch_size)) {
    functions.push_back(std::move(reward));
  }
  return functions;
}

}  // namespace ptrain::grpo
