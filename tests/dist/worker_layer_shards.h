// `dist_worker layer_shards`: dist::LayerShards (sharding "full") on real
// ranks against closed-form expectations.
#pragma once

#include "core/dist/launch_env.h"

namespace ptrain::dist_test {

// Prints one RESULT line with the largest error of each check; returns 0.
int run_layer_shards(const dist::LaunchEnv& launch);

}  // namespace ptrain::dist_test
