// A training run: builds the pieces, loops over update steps, logs metrics and
// writes checkpoints and the final model.
#pragma once

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/plugin/plugin_loader.h"
#include "core/train/stop_signals.h"
#include "core/train/train_options.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace ptrain::train {

struct TrainSummary {
  int64_t steps = 0;          // run by this invocation
  int64_t skipped_steps = 0;  // over the whole run, resumed parts included
  std::filesystem::path final_model_dir;
  bool stopped = false;     // ended early on SIGTERM/SIGUSR1, after saving a checkpoint
  std::string stop_reason;  // why the run ended before max_steps ("": it did not)
};

// `stop_signals`: the process's, made before any thread started (stop_signals.h).
TrainSummary run_training(const config::RunConfig& config, const plugin::LoadedPlugin& plugin,
                          dist::Communicator& communicator, const TrainOptions& options,
                          const StopSignals& stop_signals);

}  // namespace ptrain::train
