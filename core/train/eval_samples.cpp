#include "core/train/eval_samples.h"

#include "core/train/resume.h"
#include "ptrain/sdk/errors.h"

#include <fstream>

namespace ptrain::train {

EvalSamplesFile::EvalSamplesFile(const std::filesystem::path& output_dir, int64_t first_step)
    : path_(output_dir / kEvalSamplesFile) {
  truncate_metrics(path_, first_step);
}

void EvalSamplesFile::append(int64_t step, const nlohmann::json& samples) {
  if (samples.empty()) return;
  std::ofstream out(path_, std::ios::app | std::ios::binary);
  out << nlohmann::json{{"step", step}, {"samples", samples}}.dump(-1, ' ', false,
                                                                     nlohmann::json::error_handler_t::replace)
      << "\n";
  out.flush();
  if (!out) throw sdk::Error(path_.string() + ": cannot append an evaluation's samples");
}

}  // namespace ptrain::train
