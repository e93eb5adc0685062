// The report's table of sample completions: what the model answered at a
// few of its evaluations by generation (eval_samples.jsonl, train/eval_samples.h).
#pragma once

#include "core/report/run_data.h"

#include <string>

namespace ptrain::report {

// At most three evaluations (the first, the middle one and the last), each
// prompt's completion and scores; "" for a run without samples.
std::string sample_completions_table(const RunData& run);

}  // namespace ptrain::report
