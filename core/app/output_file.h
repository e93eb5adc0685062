// Files the generation commands write (--output): checked before the work
// starts, and replaced only once complete, so that a failure never leaves a
// user's earlier file cut short.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace ptrain::app {

// Throws sdk::UsageError naming `option` when the file's directory does not exist.
void check_output_dir(const std::string& path, const std::string& option);

// Writes `path` + ".part" with `write`, then renames it to `path`. Throws
// sdk::Error naming `option` and the file when writing fails.
void write_file_atomically(const std::string& path, const std::string& option,
                           const std::function<void(std::ostream&)>& write);

}  // namespace ptrain::app
