// The config the bad-input cases of a plugin's [module] keys append to: valid
// up to its [module] header at line 8, so that a case's first key is line 9.
#pragma once

#include <string>

namespace ptrain::testing {

inline std::string config_up_to_module(const std::string& plugin) {
  return "plugin = \"" + plugin +
         "\"\n"                       // 1
         "[data]\n"                   // 2
         "train = \"train.jsonl\"\n"  // 3
         "[batch]\n"                  // 4
         "global_size = 8\n"          // 5
         "[train]\n"                  // 6
         "max_steps = 10\n"           // 7
         "[module]\n";                // 8
}

}  // namespace ptrain::testing
