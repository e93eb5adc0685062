#include "core/checkpoint/owned_removal.h"

#include "core/checkpoint/remove_tree.h"
#include "ptrain/sdk/errors.h"

#include <cstdlib>
#include <vector>

namespace ptrain::checkpoint {
namespace fs = std::filesystem;

namespace {

// The path with its parent resolved (symbolic links, "..") but its last
// component as written: a link is judged as itself, not as its target.
fs::path resolved_parent_form(const fs::path& path) {
  const fs::path absolute = fs::absolute(path);
  return fs::weakly_canonical(absolute.parent_path()) / absolute.filename();
}

// True when `ancestor` is `path` or one of its parents (both absolute, normal).
bool contains(const fs::path& ancestor, const fs::path& path) {
  auto a = ancestor.begin();
  auto p = path.begin();
  for (; a != ancestor.end(); ++a, ++p) {
    if (a->empty()) continue;  // a trailing separator
    if (p == path.end() || *a != *p) return false;
  }
  return true;
}

// The directories a removal must never reach, resolved.
std::vector<fs::path> protected_dirs() {
  std::vector<fs::path> dirs{fs::path("/")};
  std::error_code error;
  const fs::path cwd = fs::current_path(error);
  if (!error) dirs.push_back(fs::weakly_canonical(cwd, error));
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(fs::weakly_canonical(home, error));
  }
  return dirs;
}

}  // namespace

void require_removable(const fs::path& path) {
  const fs::path name = path.filename();
  if (path.empty() || name == "." || name == "..") {
    throw sdk::Error("refusing to remove '" + path.string() + "': not a file or folder ptrain wrote");
  }
  const fs::path target = resolved_parent_form(path);
  for (const fs::path& kept : protected_dirs()) {
    if (contains(target, kept)) {
      throw sdk::Error("refusing to remove '" + path.string() + "': it is " + (target == kept ? "" : "a parent of ") +
                       "'" + kept.string() + "' (the filesystem root, the home or the working directory)");
    }
  }
}

void remove_owned(const fs::path& path) {
  std::error_code error;
  if (!fs::exists(fs::symlink_status(path, error))) return;
  require_removable(path);
  remove_tree(path, error);  // never remove_all: see remove_tree.h
  if (error) throw sdk::Error("cannot remove '" + path.string() + "': " + error.message());
}

std::string try_remove_owned(const fs::path& path) noexcept {
  try {
    remove_owned(path);
    return "";
  } catch (const std::exception& error) {
    return error.what();
  }
}

}  // namespace ptrain::checkpoint
