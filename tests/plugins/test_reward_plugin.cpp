// A reward library for the tests (libptrain_reward_test_rewards.so): two
// well-behaved functions whose scores a test can compute by hand, and three
// that break the RewardFunction contract in the ways the host must report.
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/reward_plugin.h"
#include "ptrain/sdk/util/example_fields.h"

#include <cctype>
#include <limits>

namespace {

using ptrain::sdk::RewardFunction;
using ptrain::sdk::RewardInput;

// The number of ASCII digits in the completion's text.
class DigitCount final : public RewardFunction {
 public:
  std::string name() const override { return "digit_count"; }
  std::vector<double> score(const std::vector<RewardInput>& inputs) override {
    std::vector<double> scores;
    for (const RewardInput& input : inputs) {
      double digits = 0;
      for (const unsigned char c : input.completion) digits += std::isdigit(c) ? 1 : 0;
      scores.push_back(digits);
    }
    return scores;
  }
};

// 1 when the completion's first byte is the first byte of the example's "answer".
class SameFirstByte final : public RewardFunction {
 public:
  std::string name() const override { return "same_first_byte"; }
  std::vector<double> score(const std::vector<RewardInput>& inputs) override {
    std::vector<double> scores;
    for (const RewardInput& input : inputs) {
      const std::string& answer = ptrain::sdk::require_string(*input.example, "answer");
      scores.push_back(!input.completion.empty() && !answer.empty() && input.completion[0] == answer[0] ? 1.0 : 0.0);
    }
    return scores;
  }
};

// Throws a DataError of its own making, as a function whose field is missing does.
class Throws final : public RewardFunction {
 public:
  std::string name() const override { return "throws"; }
  std::vector<double> score(const std::vector<RewardInput>& inputs) override {
    throw ptrain::sdk::DataError(inputs.front().example->location + ": field 'rubric': missing (test_rewards)");
  }
};

class NotFinite final : public RewardFunction {
 public:
  std::string name() const override { return "not_finite"; }
  std::vector<double> score(const std::vector<RewardInput>& inputs) override {
    return std::vector<double>(inputs.size(), std::numeric_limits<double>::quiet_NaN());
  }
};

class OneShort final : public RewardFunction {
 public:
  std::string name() const override { return "one_short"; }
  std::vector<double> score(const std::vector<RewardInput>& inputs) override {
    return std::vector<double>(inputs.size() - 1, 0.0);
  }
};

}  // namespace

PTRAIN_DEFINE_REWARD_PLUGIN("test_rewards", "0.0.1", "reward functions for the GRPO tests",
                            {"digit_count", "digits in the completion", ptrain::sdk::new_reward<DigitCount>},
                            {"same_first_byte", "first byte equals the answer's",
                             ptrain::sdk::new_reward<SameFirstByte>},
                            {"throws", "throws a DataError", ptrain::sdk::new_reward<Throws>},
                            {"not_finite", "scores NaN", ptrain::sdk::new_reward<NotFinite>},
                            {"one_short", "one score too few", ptrain::sdk::new_reward<OneShort>})
