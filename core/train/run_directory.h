// The run's output directory (config.toml, metrics.jsonl, logs, checkpoints/,
// final/), with the rules of docs/reliability.md "Run directories":
//
// - A run directory is one ptrain made: it holds ptrain_run.json, written
//   first (run_files.h). A directory that holds anything else is never used,
//   replaced or resumed; an existing run only with --overwrite or --resume.
// - A run holds its directory while it runs (run_lock.h): a second run is
//   refused at once, naming the holder.
// - Everything is loaded and checked before the directory changes, and what
//   a start changes stays undoable until its first step completes
//   (start_journal.h): --overwrite sets the old run aside and deletes it
//   only then; a start that fails puts it back.
#pragma once

#include "core/dist/communicator.h"
#include "core/train/run_lock.h"

#include <filesystem>
#include <string>
#include <thread>

namespace ptrain::train {

class RunDirectory {
 public:
  enum class Use { kNew, kOverwrite, kResume };

  // Collective, before anything loads. Rank 0 takes the directory's lock
  // when it has one, undoes an earlier start that died before its first
  // step, and checks that `dir` is missing, empty or a run directory, and
  // that a run there is resumed or overwritten. Otherwise every rank throws
  // sdk::ConfigError (rank 0's names the directory and what it holds, or
  // who holds it), and nothing in the directory has changed.
  RunDirectory(std::filesystem::path dir, Use use, dist::Communicator& communicator);
  // Rank 0 undoes the start unless confirm_start() ran.
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  // Collective, once everything has loaded and been checked: rank 0 creates
  // the directory with its marker (or sets aside the run it replaces) and
  // writes config.toml; every rank adds its log file.
  void create(const std::string& resolved_config_toml);

  // After the run's first completed step: deletes what the start set aside
  // (in the background: a replaced run can be large). Every rank may call
  // it; later calls do nothing.
  void confirm_start();

 private:
  void open();
  void lock();
  void create_on_rank0(const std::string& resolved_config_toml);
  void undo() noexcept;

  std::filesystem::path dir_;
  Use use_;
  dist::Communicator& communicator_;
  RunLock lock_;            // rank 0's
  bool holds_run_ = false;  // when opened, the directory held a run
  bool started_ = false;    // create() began changing the directory
  bool confirmed_ = false;
  std::thread remover_;  // deletes what a confirmed start set aside; joined on destruction
};

}  // namespace ptrain::train
