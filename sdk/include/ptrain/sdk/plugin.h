// The entry point every plugin library exports, and the ABI it promises.
//
// A plugin defines one C-linkage function, `ptrain_plugin_info`, through
// PTRAIN_DEFINE_PLUGIN. The host loads the library with Boost.DLL, calls it,
// and checks `abi_version` and `torch_version` before it touches anything
// else, so the first two fields of PluginInfo keep their place in every ABI
// version. Objects a plugin creates must not outlive its library: the host
// ties each one to the library handle.
#pragma once

#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/train_module.h"
#include "ptrain/sdk/version.h"

#include <torch/version.h>

#include <cstdint>

namespace ptrain::sdk {

// Raise whenever a header under ptrain/sdk changes a class layout, a virtual
// function or an inline function (and PTRAIN_SDK_VERSION_MAJOR with it, version.h).
// CMake reads this line (cmake/ptrain_sdk_version.cmake); keep its shape.
inline constexpr uint32_t kAbiVersion = 9;  // docs/plugins.md, "ABI history", lists what each version changed

#define PTRAIN_STRINGIFY_DETAIL(x) #x
#define PTRAIN_STRINGIFY(x) PTRAIN_STRINGIFY_DETAIL(x)
// "MAJOR.MINOR" of the LibTorch this translation unit is compiled against.
#define PTRAIN_TORCH_VERSION PTRAIN_STRINGIFY(TORCH_VERSION_MAJOR) "." PTRAIN_STRINGIFY(TORCH_VERSION_MINOR)

struct PluginInfo {
  uint32_t abi_version;                          // frozen position: kAbiVersion of the SDK the plugin was built with
  const char* torch_version;                     // frozen position: PTRAIN_TORCH_VERSION the plugin was built with
  const char* name;                              // what `plugin = "..."` selects
  const char* version;                           // the plugin's own version
  const char* description;                       // one line for `ptrain plugins`
  void (*declare_config)(ConfigSchema& schema);  // the [module] keys
  TrainModule* (*create)();                      // a new module; the host owns it
};

inline constexpr const char* kPluginEntrySymbol = "ptrain_plugin_info";

}  // namespace ptrain::sdk

// Defines the exported entry. Use once per plugin library, at global scope:
//   PTRAIN_DEFINE_PLUGIN("sft", "0.1.0", "Supervised fine-tuning", declare_sft_config, create_sft_module)
#define PTRAIN_DEFINE_PLUGIN(NAME, VERSION, DESCRIPTION, DECLARE_CONFIG, CREATE)                               \
  extern "C" __attribute__((visibility("default"))) const ::ptrain::sdk::PluginInfo* ptrain_plugin_info() {    \
    static const ::ptrain::sdk::PluginInfo info{                                                               \
        ::ptrain::sdk::kAbiVersion, PTRAIN_TORCH_VERSION, NAME, VERSION, DESCRIPTION, DECLARE_CONFIG, CREATE}; \
    return &info;                                                                                              \
  }
