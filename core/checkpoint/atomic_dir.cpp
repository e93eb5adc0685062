#include "core/checkpoint/atomic_dir.h"

#include "core/checkpoint/owned_removal.h"
#include "core/log/failpoint.h"
#include "ptrain/sdk/errors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

namespace ptrain::checkpoint {
namespace fs = std::filesystem;

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_directory_atomically(const fs::path& target, const std::function<void(const fs::path& staging)>& fill) {
  const fs::path parent = target.parent_path();
  fs::create_directories(parent);
  const std::string suffix = target.filename().string() + "-" + std::to_string(::getpid());
  const fs::path staging = parent / (".tmp-" + suffix);
  remove_owned(staging);
  fs::create_directories(staging);
  fill(staging);
  for (const auto& entry : fs::directory_iterator(staging)) fsync_path(entry.path());
  fsync_path(staging);
  failpoint::kill_point("before_rename");

  // rename() cannot replace a non-empty directory: move the old one aside
  // first, and delete it only once the new one is in place. A symbolic
  // link there is moved and removed as a link, never followed.
  const fs::path previous = parent / (".old-" + suffix);
  std::error_code error;
  const bool had_previous = fs::exists(fs::symlink_status(target, error));
  if (had_previous) fs::rename(target, previous);
  fs::rename(staging, target);
  fsync_path(parent);
  if (had_previous) remove_owned(previous);
}

void write_file_atomically(const fs::path& path, const std::string& text) {
  const fs::path staging = path.parent_path() / (".tmp-" + path.filename().string() + "-" + std::to_string(::getpid()));
  {
    std::ofstream out(staging, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw sdk::Error(staging.string() + ": cannot write");
  }
  fsync_path(staging);
  fs::rename(staging, path);
  fsync_path(path.parent_path());
}

}  // namespace ptrain::checkpoint
