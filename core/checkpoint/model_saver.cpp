#include "core/checkpoint/model_saver.h"

#include "ptrain/sdk/errors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ptrain::checkpoint {
namespace fs = std::filesystem;

namespace {

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// step_N → N, or -1 for anything else.
int64_t checkpoint_step(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.rfind("step_", 0) != 0) return -1;
  try {
    size_t used = 0;
    const int64_t step = std::stoll(name.substr(5), &used);
    return used == name.size() - 5 ? step : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

void save_model_atomically(const model::CausalLm& model, const fs::path& target) {
  const fs::path parent = target.parent_path();
  fs::create_directories(parent);
  const fs::path staging = parent / (".tmp-" + target.filename().string() + "-" + std::to_string(::getpid()));
  fs::remove_all(staging);
  fs::create_directories(staging);
  model.save_hf_dir(staging);
  for (const auto& entry : fs::directory_iterator(staging)) fsync_path(entry.path());
  fsync_path(staging);

  // rename() cannot replace a non-empty directory: move the old one aside
  // first, and delete it only once the new one is in place.
  const fs::path previous = parent / (".old-" + target.filename().string() + "-" + std::to_string(::getpid()));
  const bool had_previous = fs::exists(target);
  if (had_previous) fs::rename(target, previous);
  fs::rename(staging, target);
  fsync_path(parent);
  if (had_previous) fs::remove_all(previous);
}

void prune_checkpoints(const fs::path& checkpoints_dir, int64_t keep_last) {
  std::error_code error;
  if (!fs::is_directory(checkpoints_dir, error)) return;
  std::vector<std::pair<int64_t, fs::path>> checkpoints;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir)) {
    const int64_t step = checkpoint_step(entry.path());
    if (step >= 0 && entry.is_directory()) checkpoints.emplace_back(step, entry.path());
  }
  std::sort(checkpoints.begin(), checkpoints.end());
  const auto excess = static_cast<int64_t>(checkpoints.size()) - keep_last;
  for (int64_t i = 0; i < excess; ++i) fs::remove_all(checkpoints[i].second);
}

}  // namespace ptrain::checkpoint
