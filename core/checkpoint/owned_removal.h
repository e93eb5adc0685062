// Removing files and folders ptrain wrote, and nothing else
// (docs/reliability.md "Run directories"). Every removal in the core goes
// through here, so that none reaches the filesystem root, the home or
// working directory or a parent of one of them, and none follows a symbolic
// link: a link is removed itself, never what it points to.
#pragma once

#include <filesystem>
#include <string>

namespace ptrain::checkpoint {

// Throws sdk::Error naming `path` when it is "/", the home directory, the
// working directory or one of their parents, or ends in "." or "..".
void require_removable(const std::filesystem::path& path);

// Removes `path` and, for a directory, everything in it (links inside are
// removed as links). Nothing happens when it does not exist. Throws
// sdk::Error when require_removable() refuses it or the removal fails.
void remove_owned(const std::filesystem::path& path);

// The same for clean-up that must not throw: returns why it failed, or "".
std::string try_remove_owned(const std::filesystem::path& path) noexcept;

}  // namespace ptrain::checkpoint
