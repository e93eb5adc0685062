#include "core/train/checkpointer.h"

#include "core/log/logger.h"

namespace ptrain::train {

Checkpointer::Checkpointer(const config::CheckpointSection& section, std::filesystem::path checkpoints_dir,
                           dist::Communicator& communicator, std::function<checkpoint::CheckpointData()> snapshot,
                           int64_t first_step)
    : every_steps_(section.every_steps),
      keep_last_(section.keep_last),
      checkpoints_dir_(std::move(checkpoints_dir)),
      communicator_(communicator),
      snapshot_(std::move(snapshot)),
      last_saved_step_(first_step) {}

void Checkpointer::after_step(int64_t completed_steps, bool stopping) {
  const bool due = every_steps_ > 0 && completed_steps % every_steps_ == 0;
  if (due || stopping) save(completed_steps);
}

void Checkpointer::at_end(int64_t completed_steps) { save(completed_steps); }

void Checkpointer::save(int64_t completed_steps) {
  if (completed_steps == last_saved_step_) return;
  // Every rank takes the snapshot: gathering sharded optimizer state is collective.
  const checkpoint::CheckpointData data = snapshot_();
  if (communicator_.rank() == 0) {
    const std::filesystem::path saved = checkpoint::write_checkpoint(checkpoints_dir_, data, keep_last_);
    log::info("checkpoint", "saved " + saved.string());
  }
  communicator_.barrier();
  last_saved_step_ = completed_steps;
}

}  // namespace ptrain::train
