// Where reduced step metrics go: one JSON object per step in
// <output_dir>/metrics.jsonl (rank 0 only), and a readable console line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace ptrain::metrics {

class JsonlMetricsWriter {
 public:
  // Appends to the file; each line is flushed so a crash loses at most the
  // step being written.
  explicit JsonlMetricsWriter(const std::filesystem::path& path);
  void write(int64_t step, const std::map<std::string, double>& values);

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

// "step 12/300 | loss 2.3411 | lr 1.00e-03 | grad_norm 0.812 | tok/s 5123 | eta 1m12s", with each of
// `extra` (logging.console_metrics) that the step has before the eta: "| kl 0.0213 | rewards/chosen 0.431".
std::string format_console_line(int64_t step, int64_t max_steps, const std::map<std::string, double>& values,
                                double eta_s, const std::vector<std::string>& extra = {});

}  // namespace ptrain::metrics
