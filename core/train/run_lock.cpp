#include "core/train/run_lock.h"

#include "core/train/run_files.h"
#include "ptrain/sdk/errors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

// The whole file, from offset 0 to whatever end it grows to.
struct flock whole_file(short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  return lock;
}

// What the holder wrote into the file, as a sentence.
std::string describe_holder(const fs::path& path, pid_t locking_pid) {
  std::ifstream in(path);
  const nlohmann::json holder = nlohmann::json::parse(in, nullptr, false);
  if (!holder.is_object() || !holder.contains("pid")) {
    return "process " + std::to_string(locking_pid) + " (it has not written its name into " + path.string() + " yet)";
  }
  return "pid " + std::to_string(holder.value("pid", int64_t{-1})) + " on host " + holder.value("host", "?") +
         ", running since " + holder.value("started", "?");
}

// True when `fd` is still the file at `path`: a lock taken on a file that
// was replaced or removed in the meantime guards nothing.
bool same_file(int fd, const fs::path& path) {
  struct stat opened {};
  struct stat named {};
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
         opened.st_ino == named.st_ino;
}

bool is_unsupported(int error) { return error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS || error == EINVAL; }

}  // namespace

RunLock::Outcome RunLock::acquire(const fs::path& dir) {
  release();
  const fs::path path = dir / kRunLockFile;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw sdk::Error(path.string() + ": cannot open the run directory's lock file: " + std::strerror(errno));
    struct flock lock = whole_file(F_WRLCK);
    if (::fcntl(fd, F_SETLK, &lock) != 0) {
      const int error = errno;
      struct flock probe = whole_file(F_WRLCK);
      const pid_t pid = ::fcntl(fd, F_GETLK, &probe) == 0 ? probe.l_pid : -1;
      ::close(fd);
      if (is_unsupported(error)) {
        failure_ = std::strerror(error);
        return Outcome::kUnsupported;
      }
      holder_ = describe_holder(path, pid);
      return Outcome::kHeld;
    }
    if (!same_file(fd, path)) {  // removed or replaced between open() and the lock: try the new file
      ::close(fd);
      continue;
    }
    const std::string text =
        nlohmann::json{{"host", host_name()}, {"pid", static_cast<int64_t>(::getpid())}, {"started", utc_now()}}
            .dump() +
        "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      ::close(fd);
      throw sdk::Error(path.string() + ": cannot write the run directory's lock file: " + std::strerror(errno));
    }
    fd_ = fd;
    return Outcome::kAcquired;
  }
  holder_ = "another process (" + path.string() + " keeps being replaced)";
  return Outcome::kHeld;
}

void RunLock::release() {
  if (fd_ < 0) return;
  ::close(fd_);  // closing the descriptor releases the lock
  fd_ = -1;
}

std::optional<std::string> lock_holder(const fs::path& dir) {
  const fs::path path = dir / kRunLockFile;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct flock probe = whole_file(F_WRLCK);
  const bool held = ::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  ::close(fd);
  if (!held) return std::nullopt;
  return describe_holder(path, probe.l_pid);
}

std::string network_filesystem(const fs::path& dir) {
  struct statfs info {};
  if (::statfs(dir.c_str(), &info) != 0) return "";
  switch (static_cast<unsigned long>(info.f_type)) {
    case 0x6969UL:
      return "NFS";
    case 0xFF534D42UL:
    case 0xFE534D42UL:
    case 0x517BUL:
      return "CIFS/SMB";
    case 0x0BD00BD0UL:
      return "Lustre";
    case 0x47504653UL:
      return "GPFS";
    case 0x65735546UL:
      return "FUSE";
    default:
      return "";
  }
}

}  // namespace ptrain::train
