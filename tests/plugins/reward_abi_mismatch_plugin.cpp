// A reward library that claims a future SDK ABI: the host must refuse it by
// path and both versions before reading its function table.
#include "ptrain/sdk/reward_plugin.h"

extern "C" __attribute__((visibility("default"))) const ptrain::sdk::RewardPluginInfo* ptrain_reward_plugin_info() {
  static const ptrain::sdk::RewardPluginInfo info{ptrain::sdk::kAbiVersion + 1000, PTRAIN_TORCH_VERSION,
                                                  "abi_mismatch", "0.0.1", "test fixture", nullptr, 0};
  return &info;
}
