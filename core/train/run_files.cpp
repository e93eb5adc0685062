#include "core/train/run_files.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool has_prefix(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// Exactly the names the core, the SDK's token cache and the bundled plugins write.
bool is_fixed_run_file(const std::string& name) {
  static const std::set<std::string> names{kRunMarkerFile,
                                           kRunLockFile,
                                           kStartJournalDir,
                                           "config.toml",
                                           "metrics.jsonl",
                                           "eval_samples.jsonl",
                                           "checkpoints",
                                           "final",
                                           "best",
                                           "best.json",
                                           "token_cache",
                                           "report.html",  // ptrain report's default output
                                           "reference_logps.json",
                                           "reference_logps.json.tmp"};  // the DPO plugin's default reference cache
  return names.count(name) > 0;
}

// log_rank<N>.txt (core/log/logger.cpp)
bool is_log_file(const std::string& name) {
  const std::string prefix = "log_rank", suffix = ".txt";
  return has_prefix(name, prefix) && name.size() > prefix.size() + suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         all_digits(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
}

// .tmp-<name>-<pid> and .old-<name>-<pid> of a ptrain name (checkpoint/atomic_dir.cpp).
bool is_staging_name(const std::string& name) {
  for (const std::string prefix : {".tmp-", ".old-"}) {
    if (!has_prefix(name, prefix)) continue;
    const size_t dash = name.rfind('-');
    if (dash <= prefix.size() - 1 || !all_digits(name.substr(dash + 1))) return false;
    return is_fixed_run_file(name.substr(prefix.size(), dash - prefix.size()));
  }
  return false;
}

}  // namespace

bool is_run_file(const std::string& name) {
  return is_fixed_run_file(name) || is_log_file(name) || is_staging_name(name) ||
         has_prefix(name, "events.out.tfevents.");  // TensorBoard (metrics/tensorboard_writer.cpp)
}

std::vector<std::string> entry_names(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const bool folder = it->is_directory(error) && !it->is_symlink(error);
    names.push_back(it->path().filename().string() + (folder ? "/" : ""));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> contents_of(const fs::path& dir) {
  std::vector<std::string> names = entry_names(dir);
  names.erase(std::remove(names.begin(), names.end(), kRunLockFile), names.end());
  return names;
}

bool holds_run_marker(const std::vector<std::string>& contents) {
  return std::find(contents.begin(), contents.end(), kRunMarkerFile) != contents.end();
}

std::string list_names(const std::vector<std::string>& names, size_t shown) {
  std::string text;
  const size_t listed = std::min(names.size(), shown);
  for (size_t i = 0; i < listed; ++i) {
    if (i > 0) text += (i + 1 == listed && listed == names.size()) ? " and " : ", ";
    text += names[i];
  }
  if (names.size() > listed) text += " and " + std::to_string(names.size() - listed) + " more";
  return text;
}

}  // namespace ptrain::train
