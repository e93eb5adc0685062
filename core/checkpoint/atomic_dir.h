// Writing directories and small files so that a crash at any moment leaves
// either the old complete version or the new complete one (docs/checkpoints.md).
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace ptrain::checkpoint {

// Calls `fill(staging)` on a temporary sibling directory of `target`, fsyncs
// every file and the directory, then renames it to `target`. An existing
// `target` is moved aside first and deleted only once the new one is in place.
void write_directory_atomically(const std::filesystem::path& target,
                                const std::function<void(const std::filesystem::path& staging)>& fill);

// Writes `text` to a temporary sibling, fsyncs it and renames it over `path`.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

void fsync_path(const std::filesystem::path& path);

}  // namespace ptrain::checkpoint
