#include "ptrain/sdk/util/builtin_rewards.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"

#include <algorithm>
#include <cmath>
#include <regex>

namespace ptrain::sdk {
namespace {

// A built-in reward: each completion scored on its own.
class PerCompletionReward : public RewardFunction {
 public:
  std::vector<double> score(const std::vector<RewardInput>& inputs) final {
    std::vector<double> scores;
    scores.reserve(inputs.size());
    for (const RewardInput& input : inputs) scores.push_back(score_one(input));
    return scores;
  }

 private:
  virtual double score_one(const RewardInput& input) const = 0;
};

class AccuracyReward final : public PerCompletionReward {
 public:
  explicit AccuracyReward(std::string field) : field_(std::move(field)) {}
  std::string name() const override { return "accuracy"; }

 private:
  double score_one(const RewardInput& input) const override {
    const std::string& answer = require_string(*input.example, field_.c_str());
    return trim_blanks(input.completion) == trim_blanks(answer) ? 1.0 : 0.0;
  }

  std::string field_;
};

class FormatReward final : public PerCompletionReward {
 public:
  explicit FormatReward(const std::string& pattern) : pattern_(checked_regex(pattern)) {}
  std::string name() const override { return "format"; }

 private:
  static std::regex checked_regex(const std::string& pattern) {
    try {
      return std::regex(pattern);
    } catch (const std::regex_error& error) {
      throw ConfigError("format_pattern '" + pattern + "' is not a valid regex: " + error.what());
    }
  }
  double score_one(const RewardInput& input) const override {
    return !input.truncated && std::regex_match(trim_blanks(input.completion), pattern_) ? 1.0 : 0.0;
  }

  std::regex pattern_;
};

class LengthReward final : public PerCompletionReward {
 public:
  LengthReward(int64_t max_length, int64_t cache) : max_length_(max_length), cache_(cache) {}
  std::string name() const override { return "length"; }

 private:
  double score_one(const RewardInput& input) const override {
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
  double score_one(const RewardInput& input) const override {
    const std::optional<double> answer = number_in(require_string(*input.example, field_.c_str()));
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

}  // namespace

std::vector<std::string> builtin_reward_names() { return {"accuracy", "format", "length", "closeness"}; }

std::unique_ptr<RewardFunction> make_builtin_reward(const std::string& name, const BuiltinRewardSettings& settings) {
  if (name == "accuracy") return std::make_unique<AccuracyReward>(settings.answer_field);
  if (name == "format") return std::make_unique<FormatReward>(settings.format_pattern);
  if (name == "closeness") return std::make_unique<ClosenessReward>(settings.answer_field);
  if (name == "length") return std::make_unique<LengthReward>(settings.max_completion_length, settings.overlong_cache);
  std::string known;
  for (const std::string& builtin : builtin_reward_names()) known += (known.empty() ? "" : ", ") + builtin;
  throw ConfigError("unknown reward function '" + name + "' (the built-in ones: " + known + ")");
}

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

std::string trim_blanks(const std::string& text) {
  const char* blanks = " \t\r\n";
  const size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(blanks) - begin + 1);
}

}  // namespace ptrain::sdk
