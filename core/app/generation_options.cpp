#include "core/app/generation_options.h"

#include "ptrain/sdk/errors.h"

#include <cmath>
#include <sstream>

namespace ptrain::app {
namespace po = boost::program_options;

namespace {

template <class T>
T value_of(const po::variables_map& values, const char* name) {
  return values[name].as<T>();
}

std::string text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void require(bool ok, const std::string& option, double value, const std::string& range) {
  if (!ok) throw sdk::UsageError("--" + option + " " + text(value) + ": must be " + range);
}

}  // namespace

void add_model_options(po::options_description& options) {
  po::options_description_easy_init add = options.add_options();
  add("model,m", po::value<std::string>()->required(),
      "a model directory, a run directory (its final/), a checkpoint, or a LoRA adapter directory");
  add("base", po::value<std::string>(), "a LoRA adapter's base model (default: its adapter_config.json's)");
  add("device", po::value<std::string>()->default_value("auto"), "auto (this rank's GPU when one is visible) or cpu");
  add("cpu-kernels", po::value<std::string>()->default_value("avx2"),
      "avx2: the same completions on every x86-64 CPU; native: the CPU's fastest kernels");
}

ModelOptions model_options_from(const po::variables_map& values) {
  ModelOptions options;
  options.model = value_of<std::string>(values, "model");
  if (values.count("base")) options.base = value_of<std::string>(values, "base");
  const std::string device = value_of<std::string>(values, "device");
  if (device != "auto" && device != "cpu") throw sdk::UsageError("--device " + device + ": expected auto or cpu");
  options.cpu_only = device == "cpu";
  const std::string kernels = value_of<std::string>(values, "cpu-kernels");
  if (kernels != "avx2" && kernels != "native") {
    throw sdk::UsageError("--cpu-kernels " + kernels + ": expected avx2 or native");
  }
  options.avx2_kernels = kernels == "avx2";
  return options;
}

void add_sampling_options(po::options_description& options, double temperature) {
  const sdk::SamplingParams defaults;
  po::options_description_easy_init add = options.add_options();
  add("n", po::value<int64_t>()->default_value(1), "completions per prompt");
  add("temperature", po::value<double>()->default_value(temperature, text(temperature)), "0: greedy");
  add("top-k", po::value<int64_t>()->default_value(defaults.top_k), "keep the k most likely tokens; 0: off");
  add("top-p", po::value<double>()->default_value(defaults.top_p, text(defaults.top_p)),
      "nucleus: the smallest set with probability >= p; 1: off");
  add("min-p", po::value<double>()->default_value(defaults.min_p, text(defaults.min_p)),
      "drop tokens below min-p times the most likely one's probability; 0: off");
  add("repetition-penalty", po::value<double>()->default_value(1.0, "1"), "CTRL's penalty on seen tokens; 1: off");
  add("max-new-tokens", po::value<int64_t>()->default_value(defaults.max_new_tokens), "tokens per completion at most");
  add("stop", po::value<std::vector<std::string>>()->composing(),
      "end a completion once its text contains this string, kept (repeatable)");
  add("seed", po::value<uint64_t>()->default_value(0), "with the prompt's and completion's index, each draw's seed");
  add("batch-size", po::value<int64_t>()->default_value(0),
      "sequences decoded together on a rank (0: all of a round); the completions do not depend on it");
}

generation::GenerationSettings generation_settings_from(const po::variables_map& values) {
  generation::GenerationSettings settings;
  sdk::SamplingParams& sampling = settings.sampling;
  settings.per_prompt = value_of<int64_t>(values, "n");
  require(settings.per_prompt >= 1, "n", static_cast<double>(settings.per_prompt), "at least 1");
  sampling.temperature = value_of<double>(values, "temperature");
  require(std::isfinite(sampling.temperature) && sampling.temperature >= 0.0, "temperature", sampling.temperature,
          ">= 0 (0: greedy)");
  sampling.top_k = value_of<int64_t>(values, "top-k");
  require(sampling.top_k >= 0, "top-k", static_cast<double>(sampling.top_k), ">= 0 (0: off)");
  sampling.top_p = value_of<double>(values, "top-p");
  require(sampling.top_p > 0.0 && sampling.top_p <= 1.0, "top-p", sampling.top_p, "in (0, 1]");
  sampling.min_p = value_of<double>(values, "min-p");
  require(sampling.min_p >= 0.0 && sampling.min_p < 1.0, "min-p", sampling.min_p, "in [0, 1)");
  sampling.repetition_penalty = value_of<double>(values, "repetition-penalty");
  require(std::isfinite(sampling.repetition_penalty) && sampling.repetition_penalty > 0.0, "repetition-penalty",
          sampling.repetition_penalty, "> 0 (1: off)");
  sampling.max_new_tokens = value_of<int64_t>(values, "max-new-tokens");
  require(sampling.max_new_tokens >= 1, "max-new-tokens", static_cast<double>(sampling.max_new_tokens), "at least 1");
  if (values.count("stop")) sampling.stop_strings = value_of<std::vector<std::string>>(values, "stop");
  for (const std::string& stop : sampling.stop_strings) {
    if (stop.empty()) throw sdk::UsageError("--stop: an empty stop string would end every completion at once");
  }
  sampling.seed = value_of<uint64_t>(values, "seed");
  settings.max_batch = value_of<int64_t>(values, "batch-size");
  require(settings.max_batch >= 0, "batch-size", static_cast<double>(settings.max_batch), ">= 0 (0: all)");
  return settings;
}

}  // namespace ptrain::app
