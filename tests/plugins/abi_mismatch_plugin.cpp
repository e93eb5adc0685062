// A plugin that claims a future SDK ABI: the loader must refuse it by name and version.
#include "ptrain/sdk/plugin.h"

extern "C" __attribute__((visibility("default"))) const ptrain::sdk::PluginInfo* ptrain_plugin_info() {
  static const ptrain::sdk::PluginInfo info{ptrain::sdk::kAbiVersion + 1000, PTRAIN_TORCH_VERSION, "abi_mismatch",
                                            "0.0.1", "test fixture", nullptr, nullptr};
  return &info;
}
