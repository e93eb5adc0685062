// The options `ptrain generate` and `ptrain eval` share: the model, the
// device and CPU kernels, and the sampling parameters, each checked with the
// option it came from named (docs/generation.md).
#pragma once

#include "core/generation/completions.h"

#include <boost/program_options.hpp>

#include <string>

namespace ptrain::app {

struct ModelOptions {
  std::string model;         // a model, run, checkpoint or adapter directory
  std::string base;          // an adapter's base model; may be empty
  bool cpu_only = false;     // --device cpu
  bool avx2_kernels = true;  // --cpu-kernels avx2
};

// --model, --base, --device, --cpu-kernels.
void add_model_options(boost::program_options::options_description& options);
ModelOptions model_options_from(const boost::program_options::variables_map& values);

// --n, --temperature (default `temperature`), --top-k, --top-p, --min-p,
// --repetition-penalty, --max-new-tokens, --stop, --seed, --batch-size.
void add_sampling_options(boost::program_options::options_description& options, double temperature);
// Throws sdk::UsageError naming the option and the range it must lie in.
generation::GenerationSettings generation_settings_from(const boost::program_options::variables_map& values);

}  // namespace ptrain::app
