// What the core hands a plugin: the models, tokenizer, its validated config,
// rank information and the host's logger. Plugins reach nothing else.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/environment.h"
#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/generation.h"
#include "ptrain/sdk/model.h"
#include "ptrain/sdk/progress.h"
#include "ptrain/sdk/reward_model.h"
#include "ptrain/sdk/rewards.h"
#include "ptrain/sdk/tokenizer.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ptrain::sdk {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
};

struct RunInfo {
  uint64_t seed = 0;
  int64_t max_length = 0;  // data.max_length: longest sequence in tokens, prompt included
  int64_t step = 0;        // the update step being prepared or computed (0-based)
  int64_t epoch = 0;
  std::string output_dir;  // the run directory (caches a plugin keeps across restarts go here)
};

// Logs through the host's logger, as "[component] message" with the rank.
// Rank 0 prints info; every rank prints warnings and errors.
class Logger {
 public:
  virtual ~Logger() = default;
  virtual void info(std::string_view component, std::string_view message) = 0;
  virtual void warn(std::string_view component, std::string_view message) = 0;
  virtual void error(std::string_view component, std::string_view message) = 0;
};

class Context {
 public:
  virtual ~Context() = default;
  virtual RankInfo rank_info() const = 0;
  virtual RunInfo run_info() const = 0;
  virtual LanguageModel& policy() = 0;
  // A copy of the policy's current weights that takes no gradients (e.g. a
  // reference model taken at setup).
  virtual std::unique_ptr<LanguageModel> frozen_policy_copy() = 0;
  // A Hugging Face model directory loaded without gradients; throws
  // sdk::ModelError naming the directory or tensor.
  virtual std::unique_ptr<LanguageModel> load_frozen_model(const std::string& model_dir) = 0;
  // Sums a tensor over all ranks, in place: a CPU tensor or one on device().
  // Collective: every rank must call it the same number of times with
  // tensors of the same shape and dtype (e.g. to assemble values each rank
  // computed for its shard of the dataset, or a batch statistic).
  virtual void all_reduce_sum(at::Tensor& tensor) = 0;
  // Every rank's `local` concatenated along dim 0 in rank order: [Σ_r n_r, ...]
  // from each rank's [n_r, ...] (a 0-dim tensor is one row). n_r may differ
  // between ranks and be 0; the other dims and the (numeric) dtype must
  // agree, else every rank throws sdk::PluginError. The result is on local's
  // device (a CPU tensor or one on device()). Collective, like
  // all_reduce_sum. The default is for contexts of one rank.
  virtual at::Tensor all_gather(const at::Tensor& local) {
    return (local.dim() == 0 ? local.reshape({1}) : local).clone();
  }
  // The global batch of the prepare() or prepare_eval() call in progress,
  // the same on every rank (sdk::GlobalBatch): valid from the start of that
  // call until the next one. Throws sdk::PluginError in contexts that run no
  // steps (the default).
  virtual const GlobalBatch& global_batch() const {
    throw PluginError("this context has no global batch (it runs no update steps)");
  }
  // Counts `tokens` this rank ran through a forward without gradients of a
  // model of `model_parameters` parameters (a reference model's log-probs, a
  // KL estimate, a scoring pass) as work of the current step: the core adds
  // them to the step's forward_tokens, to tokens_per_s, and 2·model_parameters
  // FLOPs per token to mfu. Not collective; evaluation work is not counted.
  // The default is for contexts that measure nothing.
  virtual void add_forward_tokens(int64_t tokens, int64_t model_parameters) {
    (void)tokens;
    (void)model_parameters;
  }
  // Where this rank computes (runtime.device): the policy's weights live
  // there, and a plugin creates its tensors there or on the device of the
  // tensors it is given (sdk/util helpers do the latter). The default is
  // for contexts without a model on a device.
  virtual at::Device device() const { return at::kCPU; }
  // The dtype the policy's matrix products read (runtime.precision:
  // float32, or bfloat16 under bf16-mixed). Weights, gradients, log-probs
  // and loss sums stay float32 either way; a plugin needs it only for
  // tensors it multiplies itself.
  virtual at::ScalarType compute_dtype() const { return at::kFloat; }
  virtual const Tokenizer& tokenizer() const = 0;
  virtual const ConfigValues& module_config() const = 0;  // [module], validated against the plugin's schema
  virtual Logger& logger() = 0;
  // Starts showing a phase of `total` items, e.g. start_progress("reference
  // log-probs", shard_size). Rank 0's progress is what users see. Not pure, so
  // contexts written before it (tests, other hosts) need not implement it.
  virtual std::unique_ptr<Progress> start_progress(std::string_view label, int64_t total) {
    return std::make_unique<NoProgress>();
  }
  // Samples completions from the current policy (sdk/generation.h). The
  // default is for contexts without a model to sample from.
  virtual RolloutEngine& rollout_engine() { throw PluginError("this context offers no rollout engine"); }
  // This rank's part of the global batch of update step run_info().step +
  // steps_ahead (≥ 1), as the sampler will deal it to this rank then: the
  // prompts that follow the step's own in the epoch order (continuing into
  // the next epoch), for a plugin that needs more examples than its step's
  // (GRPO's dynamic sampling refills its batch from them). Nothing is
  // consumed: that later step still gets the same examples. Deterministic in
  // (seed, step, steps_ahead) and rank; the union over ranks does not depend
  // on the world size. The default is for contexts without a dataset.
  virtual std::vector<const Example*> upcoming_examples(int64_t steps_ahead) {
    throw PluginError("this context offers no further examples (asked for the batch " + std::to_string(steps_ahead) +
                      " steps ahead)");
  }
  // Loads a reward library (sdk/reward_plugin.h): a path to its .so (with a
  // '/' or ending in ".so"), or a name found as libptrain_reward_<name>.so in
  // the plugin search path. The core checks it as it checks plugins and throws
  // sdk::PluginError naming the path and the reason (missing, world-writable,
  // no reward entry, another ABI or LibTorch), sdk::ConfigError when a name
  // is not found. It also opens the reward sources a user names by a spec:
  // "python:FILE.py" (the public functions the file defines, run by the
  // core's embedded Python) and "http://host:port/path[#timeout_s=S&retries=N]"
  // (one function, named by the URL: a reward server), with sdk::ConfigError
  // naming the file or URL when one cannot be opened (docs/grpo.md). The
  // default is for contexts that load no libraries.
  virtual std::unique_ptr<RewardLibrary> open_reward_library(const std::string& name_or_path) {
    throw PluginError("this context loads no reward libraries (asked for '" + name_or_path + "')");
  }
  // Loads a reward model (sdk/reward_model.h) from a Hugging Face
  // sequence-classification directory: config.json (architectures
  // *ForSequenceClassification, one label), its weights (the decoder and
  // score.weight [1, hidden]) onto device() at compute_dtype(), like a
  // reference model, and its tokenizer.json with tokenizer_config.json's
  // chat template. Throws sdk::ModelError naming the file and the key or
  // tensor, sdk::ConfigError naming a tokenizer file. The default is for
  // contexts that load no models.
  virtual std::unique_ptr<RewardModel> load_reward_model(const std::string& model_dir) {
    throw PluginError("this context loads no reward models (asked for '" + model_dir + "')");
  }
  // Loads an environment library (sdk/environment_plugin.h): a path to its
  // .so, or a name found as libptrain_env_<name>.so in the plugin search path,
  // and creates its environment. Checked as reward libraries are: throws
  // sdk::PluginError naming the path and the reason, sdk::ConfigError when a
  // name is not found. The default is for contexts that load no libraries.
  virtual std::unique_ptr<Environment> open_environment(const std::string& name_or_path) {
    throw PluginError("this context loads no environment libraries (asked for '" + name_or_path + "')");
  }
};

}  // namespace ptrain::sdk
