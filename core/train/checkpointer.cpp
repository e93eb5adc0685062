#include "core/train/checkpointer.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/checkpoint/state_pieces.h"
#include "core/log/logger.h"
#include "core/log/step_phases.h"
#include "core/model/safetensors.h"
#include "core/shard/rank_weight_writer.h"
#include "core/shard/shared_staging_dir.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>

namespace ptrain::train {
namespace fs = std::filesystem;

Checkpointer::Checkpointer(const config::CheckpointSection& section, std::filesystem::path checkpoints_dir,
                           dist::Communicator& communicator, std::function<checkpoint::CheckpointData()> snapshot,
                           int64_t first_step, int64_t step_multiple, shard::ShardedLayers* sharded_layers)
    : every_steps_(section.every_steps),
      keep_last_(section.keep_last),
      step_multiple_(std::max<int64_t>(1, step_multiple)),
      checkpoints_dir_(std::move(checkpoints_dir)),
      communicator_(communicator),
      snapshot_(std::move(snapshot)),
      sharded_layers_(sharded_layers),
      last_saved_step_(first_step) {}

bool Checkpointer::after_step(int64_t completed_steps, bool stopping) {
  due_ = due_ || (every_steps_ > 0 && completed_steps % every_steps_ == 0);
  if (completed_steps % step_multiple_ != 0) {
    if (stopping && !announced_stop_ && communicator_.rank() == 0) {
      const int64_t next = completed_steps + step_multiple_ - completed_steps % step_multiple_;
      log::info("checkpoint", "stopping after step " + std::to_string(next) + ", not " +
                                  std::to_string(completed_steps) + ": the plugin's checkpoints resume exactly only "
                                  "after multiples of " + std::to_string(step_multiple_) + " steps");
    }
    announced_stop_ = announced_stop_ || stopping;
    return false;
  }
  if (due_ || stopping) save(completed_steps);
  due_ = false;
  return completed_steps == last_saved_step_;
}

void Checkpointer::at_end(int64_t completed_steps) {
  if (completed_steps % step_multiple_ != 0 && completed_steps != last_saved_step_ && communicator_.rank() == 0) {
    log::warn("checkpoint", "the checkpoint after the last step (" + std::to_string(completed_steps) +
                                ") falls between multiples of " + std::to_string(step_multiple_) +
                                " steps: a run resumed from it starts the plugin's cycle anew (not bit for bit)");
  }
  save(completed_steps);
}

void Checkpointer::save(int64_t completed_steps) {
  if (completed_steps == last_saved_step_) return;
  const log::PhaseScope phase(log::StepPhase::kCheckpoint);
  checkpoint::CheckpointData data = snapshot_();
  const fs::path target = checkpoints_dir_ / ("step_" + std::to_string(completed_steps));
  std::optional<shard::SharedStagingDir> rank_files;
  if (data.optimizer_state_sharded || sharded_layers_ != nullptr) {
    rank_files.emplace(checkpoints_dir_ / (".shards-step_" + std::to_string(completed_steps)), communicator_);
    write_rank_files(rank_files->path(), target, data);
  }
  if (communicator_.rank() == 0) {
    const fs::path saved = checkpoint::write_checkpoint(checkpoints_dir_, data, keep_last_);
    log::info("checkpoint", "saved " + saved.string());
  }
  communicator_.barrier();
  last_saved_step_ = completed_steps;
}

void Checkpointer::write_rank_files(const fs::path& dir, const fs::path& target, checkpoint::CheckpointData& data) {
  if (data.optimizer_state_sharded) write_optimizer_shard(dir, data);
  if (sharded_layers_ != nullptr) {
    const int64_t max_shard_bytes = data.model_files ? data.model_files->model.max_shard_bytes : 0;
    // Checkpoints keep the float32 master weights, as write_checkpoint does.
    shard::write_weights_by_rank(*data.model, *sharded_layers_, communicator_, dir, at::kFloat, max_shard_bytes,
                                 target);
    data.weights_in_rank_files = true;
  }
  communicator_.barrier();  // every rank's files are written; rank 0 moves them into the checkpoint
  data.rank_files_dir = dir;
}

void Checkpointer::write_optimizer_shard(const fs::path& dir, checkpoint::CheckpointData& data) {
  // A NaN in any rank's shard refuses the whole checkpoint, on every rank alike.
  bool finite = true;
  for (const auto& [name, tensor] : data.optimizer_state) {
    finite = finite && (!tensor.is_floating_point() || at::isfinite(tensor).all().item<bool>());
  }
  std::vector<at::Tensor> nonfinite{at::scalar_tensor(finite ? 0.0 : 1.0, at::kDouble)};
  communicator_.all_reduce_max(nonfinite);
  if (nonfinite[0].item<double>() > 0.0) {
    throw sdk::Error(dir.string() + ": refusing to write: the optimizer state holds NaN or Inf on some rank");
  }
  const fs::path file = dir / checkpoint::optimizer_shard_file(communicator_.rank(), communicator_.world_size());
  model::write_safetensors(file, data.optimizer_state);
  checkpoint::fsync_path(file);
  data.optimizer_state.clear();
}

}  // namespace ptrain::train
