// The world-size-2 check: the author's job as `ptrain launch --nproc 2 --
// train`, SGD with lr 1 (an update is the gradient): the steps the harness
// took before the checked one, then that one, whose update and metrics are
// compared with the single-process reference step.
#pragma once

#include "in_process_run.h"

#include "ptrain/testing/conformance.h"

#include <filesystem>
#include <vector>

namespace ptrain::testing {

struct TwoRankCheck {
  const ConformanceSpec& spec;
  std::filesystem::path plugin_path;                  // absolute
  std::filesystem::path output_dir;                   // the run's output_dir (must not exist yet)
  bool split_by_tokens = false;                       // the config sets batch.micro_tokens
  const std::vector<at::Tensor>& initial_parameters;  // the weights at the start of the checked step
  const StepOutcome& reference;
  const std::vector<sdk::MetricSpec>& metric_specs;
  int64_t steps_before = 0;  // ConformanceSpec::steps_before_checks
};

CheckResult check_world_size_2(const TwoRankCheck& input);

}  // namespace ptrain::testing
