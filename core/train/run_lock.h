// A run holds its directory for as long as it runs (docs/reliability.md
// "One run per directory"): a POSIX record lock (fcntl) on
// <dir>/ptrain.lock, which the kernel releases when the process ends, however
// it ends, so a lock is never left stale. The file names the holder (host,
// pid, start time) for the error a second run gets. Only rank 0 locks.
//
// POSIX locks belong to the process and end when it closes any descriptor
// of the file: nothing in ptrain opens the lock file but RunLock, and
// lock_holder() is for other processes (`ptrain validate`).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace ptrain::train {

class RunLock {
 public:
  enum class Outcome {
    kAcquired,
    kHeld,         // another process holds it: holder() names it
    kUnsupported,  // the filesystem does not lock (e.g. NFS without its lock manager): failure() says why
  };

  RunLock() = default;
  ~RunLock() { release(); }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Locks dir/ptrain.lock (created when missing; `dir` must exist) and
  // writes this process's host, pid and start time into it. Returns at once.
  // Throws sdk::Error naming the file when it cannot be opened.
  Outcome acquire(const std::filesystem::path& dir);
  void release();

  bool held() const { return fd_ >= 0; }
  const std::string& holder() const { return holder_; }
  const std::string& failure() const { return failure_; }

 private:
  int fd_ = -1;
  std::string holder_;
  std::string failure_;
};

// "pid 4242 on host node1, running since 2024-05-01 12:00:03 UTC" when a
// process holds dir's lock; nullopt when none does or there is no lock file.
// Takes no lock.
std::optional<std::string> lock_holder(const std::filesystem::path& dir);

// "NFS", "CIFS", "Lustre", ... when `dir` lies on a network filesystem,
// whose locks work across machines only where its lock service does; "" otherwise.
std::string network_filesystem(const std::filesystem::path& dir);

}  // namespace ptrain::train
