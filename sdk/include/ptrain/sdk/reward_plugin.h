// The entry point of a reward library: a shared library that offers reward
// functions (sdk/rewards.h) to the GRPO plugin, or to any plugin that asks
// Context::open_reward_library for them.
//
// A reward library defines one C-linkage function, `ptrain_reward_plugin_info`,
// through PTRAIN_DEFINE_REWARD_PLUGIN. As with algorithm plugins
// (sdk/plugin.h), the core checks `abi_version` and `torch_version` — the two
// frozen leading fields — before it reads anything else, refuses a
// world-writable file or directory, and ties every function it creates to the
// library handle, so the library stays loaded while any of them lives.
// Exceptions a function throws are re-thrown by the core as its own (same
// kind, same message), so none outlives the library that threw it.
#pragma once

#include "ptrain/sdk/plugin.h"
#include "ptrain/sdk/rewards.h"

#include <cstdint>

namespace ptrain::sdk {

struct RewardFunctionEntry {
  const char* name;              // what `reward_funcs = [...]` names; unique within the library
  const char* description;       // one line
  RewardFunction* (*create)();   // a new instance; the host owns it
};

struct RewardPluginInfo {
  uint32_t abi_version;                 // frozen position: kAbiVersion of the SDK the library was built with
  const char* torch_version;            // frozen position: PTRAIN_TORCH_VERSION it was built with
  const char* name;                     // the library's name: libptrain_reward_<name>.so on the plugin path
  const char* version;                  // the library's own version
  const char* description;              // one line
  const RewardFunctionEntry* functions;  // num_functions entries
  uint64_t num_functions;
};

inline constexpr const char* kRewardPluginEntrySymbol = "ptrain_reward_plugin_info";

// The factory of a default-constructible RewardFunction: {"name", "...", new_reward<MyReward>}.
template <class Function>
RewardFunction* new_reward() {
  return new Function();
}

}  // namespace ptrain::sdk

// Defines the exported entry. Use once per library, at global scope; each
// function is a {name, description, factory} triple:
//   PTRAIN_DEFINE_REWARD_PLUGIN("arith", "0.1.0", "Rewards for arithmetic answers",
//       {"digits", "share of the answer's digits in place", ptrain::sdk::new_reward<DigitsReward>})
#define PTRAIN_DEFINE_REWARD_PLUGIN(NAME, VERSION, DESCRIPTION, ...)                                         \
  extern "C" __attribute__((visibility("default"))) const ::ptrain::sdk::RewardPluginInfo*                   \
  ptrain_reward_plugin_info() {                                                                              \
    static const ::ptrain::sdk::RewardFunctionEntry functions[] = {__VA_ARGS__};                             \
    static const ::ptrain::sdk::RewardPluginInfo info{::ptrain::sdk::kAbiVersion,                            \
                                                      PTRAIN_TORCH_VERSION,                                  \
                                                      NAME,                                                  \
                                                      VERSION,                                               \
                                                      DESCRIPTION,                                           \
                                                      functions,                                             \
                                                      sizeof(functions) / sizeof(functions[0])};             \
    return &info;                                                                                            \
  }
