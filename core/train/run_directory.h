// The run's output directory (config.toml, metrics.jsonl, logs, checkpoints/,
// final/). A directory that already holds a run is refused unless the run is
// resumed or replaced; that is checked before anything loads, and the
// directory is created (or replaced) only once everything has loaded, so a
// run that fails to load leaves it as it was.
#pragma once

#include "core/dist/communicator.h"

#include <filesystem>
#include <string>

namespace ptrain::train {

class RunDirectory {
 public:
  // Throws sdk::ConfigError when `dir` holds a run and neither `overwrite`
  // nor `resuming` says what to do with it.
  RunDirectory(std::filesystem::path dir, bool overwrite, bool resuming);

  // Collective: rank 0 creates the directory (replacing an old run with
  // `overwrite`) and writes config.toml; every rank adds its log file.
  void create(dist::Communicator& communicator, const std::string& resolved_config_toml) const;

 private:
  std::filesystem::path dir_;
  bool overwrite_;
  bool resuming_;
};

}  // namespace ptrain::train
