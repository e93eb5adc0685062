// `ptrain report RUN_DIR [RUN_DIR...] [-o FILE]`: one self-contained HTML page
// with the runs' metric charts, summaries and configs.
#pragma once

#include <filesystem>
#include <ostream>
#include <vector>

namespace ptrain::app {

// output: "" writes <first run dir>/report.html. Prints the written path to `out`.
int command_report(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& output,
                   std::ostream& out);

}  // namespace ptrain::app
