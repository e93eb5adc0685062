#include "core/checkpoint/remove_tree.h"

#include "ptrain/sdk/errors.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace ptrain::checkpoint {
namespace {

// Directories nftw keeps open at once; deeper trees cost reopening, not failure.
constexpr int kOpenDirectories = 16;

// Where the first failure happened: nftw's callback can return only a number.
thread_local std::string g_failed_path;

// Post-order (FTW_DEPTH): a directory's entries are gone when it is reached.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (std::remove(path) == 0) return 0;
  g_failed_path = path;
  return errno;
}

}  // namespace

void remove_tree(const std::filesystem::path& path, std::error_code& error) {
  error.clear();
  g_failed_path = path.string();
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno != ENOENT) error.assign(errno, std::generic_category());
    return;
  }
  const int failed = ::nftw(path.c_str(), remove_entry, kOpenDirectories, FTW_DEPTH | FTW_PHYS);
  if (failed != 0) error.assign(failed > 0 ? failed : errno, std::generic_category());
}

void remove_tree(const std::filesystem::path& path) {
  std::error_code error;
  remove_tree(path, error);
  if (error) throw sdk::Error(g_failed_path + ": cannot remove: " + error.message());
}

}  // namespace ptrain::checkpoint
