// Built with -DPTRAIN_PYTHON_REWARDS=OFF: no embedded interpreter, so a
// python: reward is a config error that says how to get one.
#include "core/rewards/python_reward.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::rewards {

std::unique_ptr<sdk::RewardLibrary> open_python_reward_file(const std::string& file) {
  throw sdk::ConfigError("python reward file '" + file +
                         "': this ptrain was built without Python rewards (-DPTRAIN_PYTHON_REWARDS=OFF); rebuild "
                         "with PTRAIN_PYTHON_REWARDS=ON (needs python3-dev and pybind11-dev)");
}

}  // namespace ptrain::rewards
