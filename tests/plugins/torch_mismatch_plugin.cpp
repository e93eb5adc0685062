// A plugin that claims another LibTorch version: the loader must refuse it, naming both versions.
#include "ptrain/sdk/plugin.h"

extern "C" __attribute__((visibility("default"))) const ptrain::sdk::PluginInfo* ptrain_plugin_info() {
  static const ptrain::sdk::PluginInfo info{ptrain::sdk::kAbiVersion, "0.1", "torch_mismatch", "0.0.1",
                                            "test fixture", nullptr, nullptr};
  return &info;
}
