// An environment library that claims a future SDK ABI: the host must refuse
// it by path and both versions before reading the rest of its entry.
#include "ptrain/sdk/environment_plugin.h"

extern "C" __attribute__((visibility("default"))) const ptrain::sdk::EnvironmentPluginInfo*
ptrain_environment_plugin_info() {
  static const ptrain::sdk::EnvironmentPluginInfo info{
      ptrain::sdk::kAbiVersion + 1000, PTRAIN_TORCH_VERSION, "abi_mismatch", "0.0.1", "test fixture", nullptr};
  return &info;
}
