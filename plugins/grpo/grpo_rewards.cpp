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

// A built-in reward: each completion scored on its own.
class PerCompletionReward : public sdk::RewardFunction {
 public:
  std::vector<double> score(const std::vector<sdk::RewardInput>& inputs) final {
    std::vector<double> scores;
    scores.reserve(inputs.size());
    for (const sdk::RewardInput& input : inputs) scores.push_back(score_one(input));
    return scores;
  }

 private:
  virtual double score_one(const sdk::RewardInput& input) const = 0;
};

class AccuracyReward final : public PerCompletionReward {
 public:
  explicit AccuracyReward(std::string field) : field_(std::move(field)) {}
  std::string name() const override { return "accuracy"; }

 private:
  double score_one(const sdk::RewardInput& input) const override {
    const std::string& answer = sdk::require_string(*input.example, field_.c_str());
    return trim_blanks(input.completion) == trim_blanks(answer) ? 1.0 : 0.0;
  }

  std::string field_;
};

class FormatReward final : public PerCompletionReward {
 public:
  explicit FormatReward(const std::string& pattern) : pattern_(pattern) {}
  std::string name() const override { return "format"; }

 private:
  double score_one(const sdk::RewardInput& input) const override {
    return !input.truncated && std::regex_match(trim_blanks(input.completion), pattern_) ? 1.0 : 0.0;
  }

  std::regex pattern_;
};

class LengthReward final : public PerCompletionReward {
 public:
  LengthReward(int64_t max_length, int64_t cache) : max_length_(max_length), cache_(cache) {}
  std::string name() const override { return "length"; }

 private:
  double score_one(const sdk::RewardInput& input) const override {
    const int64_t free_length = max_length_ - cache_;
    const int64_t length = input.completion_tokens;
    if (length <= free_length) return 0.0;
    if (length <= max_length_) return static_cast<double>(free_length - length) / static_cast<double>(cache_);
    return -1.0;
  }

  int64_t max_length_;
  int64_t cache_;
};

// Partial credit for numeric answers: max(0, 1 − |y − a| / 10), 0 when
// either text is not a number, so a model that is close learns from it.
class ClosenessReward final : public PerCompletionReward {
 public:
  explicit ClosenessReward(std::string field) : field_(std::move(field)) {}
  std::string name() const override { return "closeness"; }

 private:
  double score_one(const sdk::RewardInput& input) const override {
    const std::optional<double> answer = number_in(sdk::require_string(*input.example, field_.c_str()));
    const std::optional<double> guess = number_in(input.completion);
    return answer && guess ? std::max(0.0, 1.0 - std::abs(*guess - *answer) / 10.0) : 0.0;
  }

  static std::optional<double> number_in(const std::string& text) {
    static const std::regex number(R"(-?[0-9]{1,15}(\.[0-9]+)?)");
    const std::string trimmed = trim_blanks(text);
    if (!std::regex_match(trimmed, number)) return std::nullopt;
    return std::stod(trimmed);
  }
  std::string field_;
};

// The function a python: or http:// entry names, opened by the core; its
// errors are prefixed with the key's location.
std::unique_ptr<sdk::RewardFunction> make_source_reward(sdk::Context& ctx, const RewardSource& source) {
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

std::optional<RewardSource> reward_source_of(const std::string& entry) {
  const std::string python = "python:";
  if (entry.rfind(python, 0) == 0) {
    const size_t colon = entry.rfind(':');
    const std::string function = colon < python.size() ? "" : entry.substr(colon + 1);
    return RewardSource{entry.substr(0, colon == python.size() - 1 ? entry.size() : colon), function, function};
  }
  for (const std::string scheme : {"http://", "https://"}) {
    if (entry.rfind(scheme, 0) != 0) continue;
    const std::string url = entry.substr(scheme.size());
    return RewardSource{entry, entry, url.substr(0, url.find('#'))};
  }
  return std::nullopt;
}

void check_reward_source(const sdk::ConfigValues& values, const std::string& entry, const RewardSource& source) {
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

std::vector<std::string> builtin_reward_list() { return {"accuracy", "format", "length", "closeness"}; }

std::unique_ptr<sdk::RewardFunction> make_builtin_reward(const std::string& name, const GrpoConfig& config) {
  if (name == "accuracy") return std::make_unique<AccuracyReward>(config.answer_field);
  if (name == "format") return std::make_unique<FormatReward>(config.format_pattern);
  if (name == "closeness") return std::make_unique<ClosenessReward>(config.answer_field);
  if (name == "length") return std::make_unique<LengthReward>(config.max_completion_length, config.overlong_cache);
  // The schema's choices reject other names before a config is read.
  throw sdk::ConfigError("unknown reward function '" + name + "'");
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
  const std::vector<std::string> builtins = builtin_reward_list();
  std::vector<std::unique_ptr<sdk::RewardFunction>> functions;
  for (const std::string& name : config.reward_funcs) {
    if (const std::optional<RewardSource> source = reward_source_of(name)) {
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
      functions.push_back(make_builtin_reward(name, config));
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

std::string trim_blanks(const std::string& text) {
  const char* blanks = " \t\r\n";
  const size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(blanks) - begin + 1);
}

}  // namespace ptrain::grpo
