// How `ptrain train` was asked to start a run (its command line, resolved):
// what building the run (training_run.h) and the loop (trainer.h) both read.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace ptrain::train {

struct TrainOptions {
  at::Device device = at::kCPU;      // runtime.device resolved (compute_device.h), the communicator's too
  bool overwrite = false;            // replace an existing non-empty output_dir
  std::string resolved_config_toml;  // written to <output_dir>/config.toml
  std::string resume;                // "": start fresh; "auto": the latest checkpoint if any; else a path
};

}  // namespace ptrain::train
