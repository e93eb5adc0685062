// When a run saves a checkpoint (docs/checkpoints.md): every
// checkpoint.every_steps updates, when a stop is requested, and once more
// after the last step (so a longer max_steps can continue the run), never
// twice for one step. A plugin whose checkpoints resume exactly only after
// multiples of some step count (sdk::TrainModule::checkpoint_multiple)
// gets its cadence and stop checkpoints at the next such multiple. Rank 0 writes under <output_dir>/checkpoints/ and keeps
// checkpoint.keep_last of them; every rank waits until it is written. Under
// distributed.sharding = "optimizer" every rank writes its own optimizer
// shard there first, so output_dir must be on a filesystem all ranks share.
// Under "full" the ranks write the weights there too, each its share
// (rank_weight_writer.h), gathering one layer at a time.
#pragma once

#include "core/checkpoint/checkpoint.h"
#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/shard/sharded_layers.h"

#include <cstdint>
#include <filesystem>
#include <functional>

namespace ptrain::train {

class Checkpointer {
 public:
  // `snapshot` gives what to save, as of the step just completed; every rank
  // calls it, rank 0 writes it.
  // `first_step`: the steps completed when this invocation started (a
  // resumed run's checkpoint holds them already). `sharded_layers`
  // (sharding "full"; may be null): the policy's, whose weights the ranks write.
  // `step_multiple`: the plugin's checkpoint_multiple().
  Checkpointer(const config::CheckpointSection& section, std::filesystem::path checkpoints_dir,
               dist::Communicator& communicator, std::function<checkpoint::CheckpointData()> snapshot,
               int64_t first_step, int64_t step_multiple, shard::ShardedLayers* sharded_layers = nullptr);

  // Collective. After update step `completed_steps` (1-based): saves when
  // the cadence says so (or said so since the last multiple), or when the
  // run is stopping, once completed_steps is a multiple of step_multiple.
  // Returns whether this step has a checkpoint: a stopping run may end.
  bool after_step(int64_t completed_steps, bool stopping);

  // Collective. At the end of the run: saves unless the last step did (or
  // no step ran), between multiples too (with a warning that resuming it
  // starts the plugin's cycle anew).
  void at_end(int64_t completed_steps);

 private:
  void save(int64_t completed_steps);
  // Collective. Each rank writes its files into `dir` (its optimizer shard,
  // its share of the weights), which rank 0 moves into the checkpoint `target`.
  void write_rank_files(const std::filesystem::path& dir, const std::filesystem::path& target,
                        checkpoint::CheckpointData& data);
  // Collective. This rank's part of a sharded optimizer state, in its own
  // file (checkpoint/state_pieces.h).
  void write_optimizer_shard(const std::filesystem::path& dir, checkpoint::CheckpointData& data);

  int64_t every_steps_;
  int64_t keep_last_;
  int64_t step_multiple_;
  bool due_ = false;              // the cadence asked for a checkpoint not yet saved
  bool announced_stop_ = false;   // the wait for a multiple is logged once
  std::filesystem::path checkpoints_dir_;
  dist::Communicator& communicator_;
  std::function<checkpoint::CheckpointData()> snapshot_;
  shard::ShardedLayers* sharded_layers_;
  int64_t last_saved_step_;
};

}  // namespace ptrain::train
