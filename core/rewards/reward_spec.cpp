#include "core/rewards/reward_spec.h"

#include "core/rewards/http_reward.h"
#include "core/rewards/python_reward.h"

namespace ptrain::rewards {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

bool is_reward_source_spec(const std::string& spec) {
  return starts_with(spec, kPythonSpecPrefix) || starts_with(spec, "http://") || starts_with(spec, "https://");
}

std::unique_ptr<sdk::RewardLibrary> open_reward_source(const std::string& spec) {
  if (starts_with(spec, kPythonSpecPrefix)) {
    return open_python_reward_file(spec.substr(std::string(kPythonSpecPrefix).size()));
  }
  return open_http_reward(spec);
}

}  // namespace ptrain::rewards
