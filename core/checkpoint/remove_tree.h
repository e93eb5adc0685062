// Removing a directory tree without std::filesystem::remove_all.
//
// PyPI's LibTorch (2.11) links libstdc++'s filesystem code into libtorch.so
// and exports it; a program linked to it (TorchConfig lists libtorch.so
// ahead of libstdc++) calls that copy of remove_all, which jumps to address 0
// at the first entry of a non-empty directory: the directory iterator's
// __erase it calls is an undefined weak symbol that nothing defines. That was
// the H200's segfault at the end of configs/sft.toml, when the step-300
// checkpoint pruned the step-100 one (docs/devices.md). ptrain's code removes
// trees with nftw(3) instead; the ctest `no_filesystem_remove_all` keeps
// remove_all out of its sources.
#pragma once

#include <filesystem>
#include <system_error>

namespace ptrain::checkpoint {

// Removes `path` and, when it is a directory, everything under it, as
// std::filesystem::remove_all does: symbolic links are removed, never
// followed, and a missing path is no error. Throws sdk::Error naming what
// could not be removed.
void remove_tree(const std::filesystem::path& path);

// The same, reporting a failure in `error` (cleared on success).
void remove_tree(const std::filesystem::path& path, std::error_code& error);

}  // namespace ptrain::checkpoint
