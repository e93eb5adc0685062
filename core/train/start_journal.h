// What a run's start changes in its directory stays undoable until the run
// completes its first step (docs/reliability.md "Nothing is lost to a failed
// start"): the journal records the start and keeps what it replaced.
//
//   .ptrain-start/start.json   {"mode": "replace" | "resume", "created_dir": bool}
//   .ptrain-start/previous/    what the start set aside: "replace" moves every
//                              ptrain entry (run_files.h) of the run it
//                              replaces there; "resume" copies config.toml,
//                              metrics.jsonl and eval_samples.jsonl, which it rewrites
//   .ptrain-start/set_aside    written once all of it is there
//
// Rank 0 calls these while it holds the directory's lock (run_lock.h).
#pragma once

#include <filesystem>
#include <optional>

namespace ptrain::train {

enum class StartMode {
  kReplace,  // a new run: in an empty directory, or replacing a run (--overwrite)
  kResume,   // continuing the run the directory holds
};

// Records the start and sets aside what it will replace; the lock file stays.
// `created_dir`: the start created the directory.
void begin_start(const std::filesystem::path& run_dir, StartMode mode, bool created_dir);

// The run completed its first step: the journal is renamed out of the way
// in one step (from then on the start is final) and its new path returned,
// for the caller to remove: it may hold a whole replaced run.
std::filesystem::path commit_start(const std::filesystem::path& run_dir);

struct UndoneStart {
  StartMode mode = StartMode::kReplace;
  bool created_dir = false;
};

// Undoes a start that was never committed, made by this process or by one
// that died: removes what it wrote (a "replace" start: every ptrain entry
// but the lock file) and puts back what it set aside. nullopt when the
// directory holds no such start.
std::optional<UndoneStart> undo_start(const std::filesystem::path& run_dir);

}  // namespace ptrain::train
