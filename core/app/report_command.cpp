#include "core/app/report_command.h"

#include "core/checkpoint/atomic_dir.h"
#include "core/report/report_html.h"
#include "core/report/run_data.h"
#include "ptrain/sdk/errors.h"

namespace ptrain::app {

int command_report(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& output,
                   std::ostream& out) {
  if (run_dirs.empty()) throw sdk::UsageError("ptrain report needs at least one run directory");
  std::vector<report::RunData> runs;
  for (const auto& dir : run_dirs) runs.push_back(report::read_run(dir));
  report::make_run_names_unique(runs);
  const std::filesystem::path path = output.empty() ? run_dirs.front() / "report.html" : output;
  checkpoint::write_file_atomically(path, report::render_report(runs));
  out << "wrote " << path.string() << " (" << runs.size() << (runs.size() == 1 ? " run" : " runs") << ")\n";
  return 0;
}

}  // namespace ptrain::app
