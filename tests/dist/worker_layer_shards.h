// Worker modes for sharding "full" on real ranks: `dist_worker layer_shards`
// (dist::LayerShards against closed forms) and `dist_worker sharded_layers`
// (a model's forward and backward under shard::ShardedLayers against
// unsharded copies), `dist_worker full_adamw DIR` (AdamW steps of such a
// model with train::FullShardedOptimizer against an unsharded copy, its
// state written per rank to DIR and resumed), `dist_worker rank_weights DIR`
// (shard::write_weights_by_rank, read back from DIR).
#pragma once

#include "core/dist/launch_env.h"

#include <filesystem>

namespace ptrain::dist_test {

// Prints one RESULT line with the largest error of each check; returns 0.
int run_layer_shards(const dist::LaunchEnv& launch);
int run_sharded_layers(const dist::LaunchEnv& launch);
int run_full_adamw(const dist::LaunchEnv& launch, const std::filesystem::path& dir);
int run_layer_divergence(const dist::LaunchEnv& launch);
int run_layer_meeting(const dist::LaunchEnv& launch);
int run_rank_weights(const dist::LaunchEnv& launch, const std::filesystem::path& dir);

}  // namespace ptrain::dist_test
