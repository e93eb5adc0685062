// The entry point of an environment library: a shared library that offers
// one multi-turn environment (sdk/environment.h) to the GRPO plugin, or to
// any plugin that asks Context::open_environment for it.
//
// An environment library defines one C-linkage function,
// `ptrain_environment_plugin_info`, through PTRAIN_DEFINE_ENVIRONMENT_PLUGIN.
// As with reward libraries (sdk/reward_plugin.h), the core checks
// `abi_version` and `torch_version` — the two frozen leading fields — before
// it reads anything else, refuses a world-writable file or directory, and
// ties the environment and every episode it starts to the library handle.
// Exceptions they throw are re-thrown by the core as its own (same kind, same
// message), so none outlives the library that threw it.
#pragma once

#include "ptrain/sdk/environment.h"
#include "ptrain/sdk/plugin.h"

#include <cstdint>

namespace ptrain::sdk {

struct EnvironmentPluginInfo {
  uint32_t abi_version;       // frozen position: kAbiVersion of the SDK the library was built with
  const char* torch_version;  // frozen position: PTRAIN_TORCH_VERSION it was built with
  const char* name;           // the environment's name: libptrain_env_<name>.so on the plugin path
  const char* version;        // the library's own version
  const char* description;    // one line
  Environment* (*create)();   // a new environment; the host owns it
};

inline constexpr const char* kEnvironmentPluginEntrySymbol = "ptrain_environment_plugin_info";

// The factory of a default-constructible Environment.
template <class Env>
Environment* new_environment() {
  return new Env();
}

}  // namespace ptrain::sdk

// Defines the exported entry. Use once per library, at global scope:
//   PTRAIN_DEFINE_ENVIRONMENT_PLUGIN("calculator", "0.1.0", "A calculator tool", CalculatorEnvironment)
#define PTRAIN_DEFINE_ENVIRONMENT_PLUGIN(NAME, VERSION, DESCRIPTION, ENVIRONMENT)                        \
  extern "C" __attribute__((visibility("default"))) const ::ptrain::sdk::EnvironmentPluginInfo*          \
  ptrain_environment_plugin_info() {                                                                     \
    static const ::ptrain::sdk::EnvironmentPluginInfo info{::ptrain::sdk::kAbiVersion,                   \
                                                           PTRAIN_TORCH_VERSION,                         \
                                                           NAME,                                         \
                                                           VERSION,                                      \
                                                           DESCRIPTION,                                  \
                                                           ::ptrain::sdk::new_environment<ENVIRONMENT>}; \
    return &info;                                                                                        \
  }
