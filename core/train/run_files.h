// The names ptrain writes at the top of a run directory (docs/reliability.md
// "Run directories"). A directory is a run directory when it holds the
// marker; a replacement moves aside or removes only these names, so a user's
// own file there stays.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ptrain::train {

inline constexpr const char* kRunMarkerFile = "ptrain_run.json";  // written first: "this is a ptrain run"
inline constexpr const char* kRunLockFile = "ptrain.lock";        // run_lock.h
inline constexpr const char* kStartJournalDir = ".ptrain-start";  // start_journal.h

// config.toml, metrics.jsonl, log_rank<N>.txt, checkpoints/, final/, best/,
// the marker, ... and the staging names ptrain's atomic writes use.
bool is_run_file(const std::string& name);

// The entries of `dir` (folders with a trailing '/'), sorted; empty when it
// does not exist or cannot be read.
std::vector<std::string> entry_names(const std::filesystem::path& dir);

// What makes a directory more than empty: its entry_names() but a lock
// file ptrain left there (an undone start leaves it).
std::vector<std::string> contents_of(const std::filesystem::path& dir);

// True when contents_of(dir) include the marker.
bool holds_run_marker(const std::vector<std::string>& contents);

// "a, b/ and c", at most `shown` names, then "and N more".
std::string list_names(const std::vector<std::string>& names, size_t shown = 8);

}  // namespace ptrain::train
