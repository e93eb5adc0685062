// <output_dir>/eval_samples.jsonl (rank 0): at each evaluation by generation
// (eval.rewards), the first held-out prompts' completions with their scores,
// one line per evaluation, for a person and for `ptrain report`'s table:
//   {"step": 300, "samples": [{"prompt": "7+11=", "completion": "11",
//                              "rewards": {"accuracy": 0.0, "closeness": 0.3}}, ...]}
// A resumed run cuts it back to the steps it keeps, as metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

namespace ptrain::train {

inline constexpr const char* kEvalSamplesFile = "eval_samples.jsonl";

class EvalSamplesFile {
 public:
  // Drops the lines of steps after `first_step` (a resumed run's).
  EvalSamplesFile(const std::filesystem::path& output_dir, int64_t first_step);

  // Appends one evaluation's line and flushes it; nothing for no samples.
  void append(int64_t step, const nlohmann::json& samples);

 private:
  std::filesystem::path path_;
};

}  // namespace ptrain::train
