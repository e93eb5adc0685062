#include "core/train/run_directory.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/checkpoint/owned_removal.h"
#include "core/log/failpoint.h"
#include "core/log/logger.h"
#include "core/train/run_files.h"
#include "core/train/start_journal.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <functional>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kMarkerFormat = "ptrain-run-1";

// Runs `action` on rank 0; every rank learns whether it threw and throws
// too (rank 0 its own error), so no rank waits for a peer that gave up.
void on_rank0(dist::Communicator& communicator, const std::string& dir, const std::function<void()>& action) {
  std::exception_ptr failure;
  double kind = 0.0;  // 1: an error, 2: a config error (exit codes differ)
  if (communicator.rank() == 0) {
    try {
      action();
    } catch (const sdk::ConfigError&) {
      failure = std::current_exception();
      kind = 2.0;
    } catch (...) {
      failure = std::current_exception();
      kind = 1.0;
    }
  }
  std::vector<at::Tensor> verdict{at::scalar_tensor(kind, at::kDouble)};
  communicator.all_reduce_max(verdict);
  if (failure) std::rethrow_exception(failure);
  const double reduced = verdict[0].item<double>();
  const std::string message = "output_dir '" + dir + "': rank 0 refused it or failed to set it up (its error says why)";
  if (reduced >= 2.0) throw sdk::ConfigError(message);
  if (reduced > 0.0) throw sdk::Error(message);
}

bool holds(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

[[noreturn]] void refuse_foreign(const fs::path& dir, const std::vector<std::string>& names) {
  std::string message = "output_dir '" + dir.string() + "' is not empty and is not a ptrain run directory (it has no " +
                        kRunMarkerFile + "): it holds " + list_names(names) +
                        ". ptrain never writes into, replaces or deletes such a folder (--overwrite included); "
                        "choose a new or empty output_dir";
  if (holds(names, "config.toml") || holds(names, "checkpoints/")) {
    message += " (a run of an earlier ptrain? continue it elsewhere with --resume " + (dir / "checkpoints").string() +
               " and a new output_dir)";
  }
  throw sdk::ConfigError(message);
}

void write_marker(const fs::path& dir) {
  const nlohmann::json marker{{"format", kMarkerFormat},
                              {"about", "a ptrain run directory: --overwrite replaces only what ptrain wrote here"}};
  checkpoint::write_file_atomically(dir / kRunMarkerFile, marker.dump(2) + "\n");
}

}  // namespace

RunDirectory::RunDirectory(fs::path dir, Use use, dist::Communicator& communicator)
    : dir_(std::move(dir)), use_(use), communicator_(communicator) {
  on_rank0(communicator_, dir_.string(), [this] { open(); });
}

RunDirectory::~RunDirectory() {
  if (remover_.joinable()) remover_.join();
  if (communicator_.rank() == 0 && started_ && !confirmed_) undo();
}

void RunDirectory::lock() {
  switch (lock_.acquire(dir_)) {
    case RunLock::Outcome::kAcquired:
      if (const std::string fs_name = network_filesystem(dir_); !fs_name.empty()) {
        log::info("run", "output_dir is on " + fs_name + ": its lock keeps out a run on another machine only where " +
                             fs_name + " locking works (e.g. NFSv4, or NFSv3 with lockd; not mounted -o nolock)");
      }
      return;
    case RunLock::Outcome::kHeld:
      throw sdk::ConfigError("output_dir '" + dir_.string() + "' is in use by another ptrain run: " + lock_.holder() +
                             ". Wait for it to end or stop it, or choose another output_dir");
    case RunLock::Outcome::kUnsupported:
      log::warn("run", "cannot lock " + (dir_ / kRunLockFile).string() + " (" + lock_.failure() +
                           "): this filesystem does not support locks, so nothing keeps a second run out of "
                           "output_dir; make sure only one run uses it");
      return;
  }
}

void RunDirectory::open() {
  std::error_code error;
  const fs::file_status status = fs::status(dir_, error);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) {
    throw sdk::ConfigError("output_dir '" + dir_.string() + "' is a file, not a folder; choose another output_dir");
  }
  // Any start leaves the lock file first; the journal of one is undone under the lock.
  if (fs::exists(dir_ / kRunLockFile, error) || fs::exists(dir_ / kStartJournalDir, error)) {
    lock();
    if (const auto undone = undo_start(dir_)) {
      log::warn("run", "output_dir '" + dir_.string() + "': an earlier start (" +
                           (undone->mode == StartMode::kResume ? "a resume" : "a new run") +
                           ") ended before its first step; put back what it had replaced");
    }
  }
  const std::vector<std::string> names = contents_of(dir_);
  if (names.empty()) return;
  if (!holds_run_marker(names)) refuse_foreign(dir_, names);
  holds_run_ = true;
  if (!lock_.held()) lock();
  if (use_ == Use::kNew) {
    throw sdk::ConfigError("output_dir '" + dir_.string() +
                           "' already holds a run; pass --resume auto to continue it, --overwrite to replace it, "
                           "or choose another output_dir");
  }
}

void RunDirectory::create(const std::string& resolved_config_toml) {
  on_rank0(communicator_, dir_.string(), [&] { create_on_rank0(resolved_config_toml); });
  log::add_log_file(dir_, communicator_.rank());
}

void RunDirectory::create_on_rank0(const std::string& resolved_config_toml) {
  if (fs::exists(dir_ / kStartJournalDir)) {  // open() undid any; only a run ignoring the lock makes one
    throw sdk::Error("output_dir '" + dir_.string() + "': another start is under way in it (" + kStartJournalDir +
                     "/ appeared while this run was loading)");
  }
  if (!holds_run_) {
    const bool created_dir = !fs::exists(dir_);
    fs::create_directories(dir_);
    // Another run may have taken the directory while this one was loading.
    if (!lock_.held()) lock();
    const std::vector<std::string> names = contents_of(dir_);
    if (!names.empty()) {
      throw sdk::ConfigError("output_dir '" + dir_.string() + "' was filled while this run was loading: it now holds " +
                             list_names(names) + "; choose another output_dir");
    }
    started_ = true;
    begin_start(dir_, StartMode::kReplace, created_dir);
    write_marker(dir_);
  } else if (use_ == Use::kOverwrite) {
    started_ = true;
    begin_start(dir_, StartMode::kReplace, false);
    write_marker(dir_);
    std::vector<std::string> kept = contents_of(dir_);
    kept.erase(std::remove_if(kept.begin(), kept.end(),
                              [](std::string name) {
                                if (!name.empty() && name.back() == '/') name.pop_back();
                                return is_run_file(name);
                              }),
               kept.end());
    if (!kept.empty()) {
      log::warn("run", "--overwrite keeps what ptrain did not write in " + dir_.string() + ": " + list_names(kept));
    }
  } else {
    started_ = true;
    begin_start(dir_, StartMode::kResume, false);
  }
  checkpoint::write_file_atomically(dir_ / "config.toml", resolved_config_toml);
  failpoint::kill_point("after_run_directory_start");
}

void RunDirectory::confirm_start() {
  if (confirmed_) return;
  confirmed_ = true;
  if (communicator_.rank() != 0 || !started_) return;
  remover_ = std::thread([committed = commit_start(dir_)] {
    // A leftover is harmless: a ptrain name that the next replacement removes.
    const std::string failure = checkpoint::try_remove_owned(committed);
    if (!failure.empty()) log::warn("run", failure);
  });
}

void RunDirectory::undo() noexcept {
  try {
    const auto undone = undo_start(dir_);
    if (!holds_run_) {
      // The directory was empty or missing: leave it so, lock file included.
      lock_.release();
      checkpoint::try_remove_owned(dir_ / kRunLockFile);
      std::error_code ignored;
      if (undone && undone->created_dir) fs::remove(dir_, ignored);  // only when empty
    }
    log::warn("run", "the run ended before its first step: output_dir '" + dir_.string() + "' is as it was before");
  } catch (const std::exception& error) {
    log::error("run", "output_dir '" + dir_.string() + "': could not undo this start (" + error.what() +
                          "); the next run there will");
  }
}

}  // namespace ptrain::train
