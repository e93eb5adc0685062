// A calculator-tool environment for GRPO (module.environment = "calculator").
//
// The policy may call the tool by writing <calc>EXPRESSION</calc> in a turn:
// the episode answers with the value (or "error: ..."), as the next user
// turn. A turn without a call is the final answer: the episode ends with
// reward 1 if its text, blanks trimmed, equals the example's "answer" field,
// else 0. An episode that runs out of turns or tokens first gets 0.
#include "calculator.h"

#include "ptrain/sdk/environment_plugin.h"
#include "ptrain/sdk/util/example_fields.h"

#include <memory>
#include <string>

namespace {

using namespace ptrain;

std::string trimmed(const std::string& text) {
  const char* blanks = " \t\r\n";
  const size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(blanks) - begin + 1);
}

class CalculatorEpisode final : public sdk::Episode {
 public:
  explicit CalculatorEpisode(std::string answer) : answer_(std::move(answer)) {}

  sdk::EnvironmentReply step(const sdk::AssistantTurn& turn) override {
    if (const std::optional<std::string> call = examples::calculator_call(turn.text)) {
      std::string error;
      const std::optional<int64_t> value = examples::evaluate_expression(*call, error);
      return sdk::EnvironmentReply::observe(value ? std::to_string(*value) : "error: " + error);
    }
    return sdk::EnvironmentReply::finish(trimmed(turn.text) == answer_ ? 1.0 : 0.0);
  }

 private:
  std::string answer_;
};

class CalculatorEnvironment final : public sdk::Environment {
 public:
  std::string name() const override { return "calculator"; }
  std::unique_ptr<sdk::Episode> start(const sdk::Example& example) override {
    return std::make_unique<CalculatorEpisode>(trimmed(sdk::require_string(example, "answer")));
  }
};

}  // namespace

PTRAIN_DEFINE_ENVIRONMENT_PLUGIN("calculator", "0.1.0", "A calculator tool: <calc>EXPR</calc> returns its value",
                                 CalculatorEnvironment)
