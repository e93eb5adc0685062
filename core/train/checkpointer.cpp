#include "core/train/checkpointer.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/checkpoint/state_pieces.h"
#include "core/log/logger.h"
#include "core/model/safetensors.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

namespace ptrain::train {

Checkpointer::Checkpointer(const config::CheckpointSection& section, std::filesystem::path checkpoints_dir,
                           dist::Communicator& communicator, std::function<checkpoint::CheckpointData()> snapshot,
                           int64_t first_step, ShardedLayers* sharded_layers)
    : every_steps_(section.every_steps),
      keep_last_(section.keep_last),
      checkpoints_dir_(std::move(checkpoints_dir)),
      communicator_(communicator),
      snapshot_(std::move(snapshot)),
      sharded_layers_(sharded_layers),
      last_saved_step_(first_step) {}

void Checkpointer::after_step(int64_t completed_steps, bool stopping) {
  const bool due = every_steps_ > 0 && completed_steps % every_steps_ == 0;
  if (due || stopping) save(completed_steps);
}

void Checkpointer::at_end(int64_t completed_steps) { save(completed_steps); }

void Checkpointer::save(int64_t completed_steps) {
  if (completed_steps == last_saved_step_) return;
  const WholeLayers whole(sharded_layers_);  // rank 0 writes every weight
  checkpoint::CheckpointData data = snapshot_();
  if (data.optimizer_state_sharded) write_optimizer_shards(completed_steps, data);
  if (communicator_.rank() == 0) {
    const std::filesystem::path saved = checkpoint::write_checkpoint(checkpoints_dir_, data, keep_last_);
    if (!data.optimizer_shards_dir.empty()) std::filesystem::remove_all(data.optimizer_shards_dir);  // moved out
    log::info("checkpoint", "saved " + saved.string());
  }
  communicator_.barrier();
  last_saved_step_ = completed_steps;
}

void Checkpointer::write_optimizer_shards(int64_t completed_steps, checkpoint::CheckpointData& data) {
  namespace fs = std::filesystem;
  const fs::path dir = checkpoints_dir_ / (".shards-step_" + std::to_string(completed_steps));
  if (communicator_.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
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
  communicator_.barrier();  // the directory exists
  const fs::path file = dir / checkpoint::optimizer_shard_file(communicator_.rank(), communicator_.world_size());
  model::write_safetensors(file, data.optimizer_state);
  checkpoint::fsync_path(file);
  communicator_.barrier();  // every shard is written; rank 0 moves them into the checkpoint
  data.optimizer_state.clear();
  data.optimizer_shards_dir = dir;
}

}  // namespace ptrain::train
