#include "core/train/start_journal.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/checkpoint/owned_removal.h"
#include "core/log/failpoint.h"
#include "core/train/run_files.h"

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <fstream>
#include <string>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStartFile = "start.json";
constexpr const char* kPreviousDir = "previous";
constexpr const char* kSetAsideFile = "set_aside";

fs::path journal_of(const fs::path& run_dir) { return run_dir / kStartJournalDir; }

// The entries a "replace" start moves aside, or removes when it is undone.
bool is_replaced(const std::string& name) {
  return is_run_file(name) && name != kRunLockFile && name != kStartJournalDir;
}

std::vector<fs::path> replaced_entries(const fs::path& run_dir) {
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    if (is_replaced(entry.path().filename().string())) entries.push_back(entry.path());
  }
  return entries;
}

void set_aside(const fs::path& run_dir, StartMode mode, const fs::path& previous) {
  if (mode == StartMode::kReplace) {
    for (const fs::path& entry : replaced_entries(run_dir)) {
      fs::rename(entry, previous / entry.filename());
      failpoint::kill_point("while_setting_aside");
    }
    return;
  }
  for (const char* name : {"config.toml", "metrics.jsonl", "eval_samples.jsonl"}) {
    std::error_code error;
    if (fs::is_regular_file(fs::symlink_status(run_dir / name, error))) {
      fs::copy_file(run_dir / name, previous / name);
      checkpoint::fsync_path(previous / name);
    }
  }
}

UndoneStart read_start(const fs::path& journal) {
  std::ifstream in(journal / kStartFile);
  const nlohmann::json start = nlohmann::json::parse(in, nullptr, false);
  UndoneStart undone;
  if (!start.is_object()) return undone;
  undone.mode = start.value("mode", "replace") == "resume" ? StartMode::kResume : StartMode::kReplace;
  undone.created_dir = start.value("created_dir", false);
  return undone;
}

}  // namespace

void begin_start(const fs::path& run_dir, StartMode mode, bool created_dir) {
  const fs::path journal = journal_of(run_dir);
  const fs::path previous = journal / kPreviousDir;
  fs::create_directories(previous);
  const nlohmann::json start{{"mode", mode == StartMode::kResume ? "resume" : "replace"},
                             {"created_dir", created_dir},
                             {"pid", static_cast<int64_t>(::getpid())}};
  checkpoint::write_file_atomically(journal / kStartFile, start.dump() + "\n");
  set_aside(run_dir, mode, previous);
  checkpoint::write_file_atomically(journal / kSetAsideFile, "");
  checkpoint::fsync_path(run_dir);
}

fs::path commit_start(const fs::path& run_dir) {
  // Renamed, not deleted: a journal that is still there later means a start
  // to undo, so it must never outlive the commit half-deleted.
  const fs::path committed = run_dir / (std::string(".old-") + kStartJournalDir + "-" + std::to_string(::getpid()));
  fs::rename(journal_of(run_dir), committed);
  checkpoint::fsync_path(run_dir);
  return committed;
}

std::optional<UndoneStart> undo_start(const fs::path& run_dir) {
  const fs::path journal = journal_of(run_dir);
  std::error_code error;
  if (!fs::is_directory(fs::symlink_status(journal, error))) return std::nullopt;
  const UndoneStart start = read_start(journal);
  const bool complete = fs::exists(journal / kSetAsideFile);
  const fs::path previous = journal / kPreviousDir;
  // Before the set-aside completed the start wrote nothing else; after it,
  // every ptrain entry in place is the start's own.
  if (complete && start.mode == StartMode::kReplace) {
    for (const fs::path& entry : replaced_entries(run_dir)) checkpoint::remove_owned(entry);
  }
  // A "resume" set-aside holds copies: before it completed, nothing changed.
  if (complete || start.mode == StartMode::kReplace) {
    for (const auto& entry : fs::directory_iterator(previous, error)) {
      fs::rename(entry.path(), run_dir / entry.path().filename());  // a resumed run's copies replace files
    }
  }
  checkpoint::remove_owned(journal);
  checkpoint::fsync_path(run_dir);
  return start;
}

}  // namespace ptrain::train
