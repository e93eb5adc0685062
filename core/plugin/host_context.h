// The core's implementation of sdk::Context for one run.
#pragma once

#include "core/dist/communicator.h"
#include "core/generation/rollout_engine.h"
#include "core/model/causal_lm.h"
#include "core/plugin/environment_library.h"
#include "core/plugin/host_logger.h"
#include "core/plugin/plugin_loader.h"
#include "core/plugin/reward_library.h"
#include "core/plugin/reward_model_loader.h"
#include "ptrain/sdk/context.h"

#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace ptrain::plugin {

class HostContext final : public sdk::Context {
 public:
  HostContext(model::CausalLm& policy, const sdk::Tokenizer& tokenizer, const sdk::ConfigValues& module_config,
              dist::Communicator& communicator, sdk::RunInfo run_info)
      : policy_(policy),
        tokenizer_(tokenizer),
        module_config_(module_config),
        communicator_(communicator),
        run_info_(std::move(run_info)) {}

  sdk::RankInfo rank_info() const override {
    return {communicator_.rank(), communicator_.world_size(), communicator_.local_rank()};
  }
  sdk::RunInfo run_info() const override { return run_info_; }
  sdk::LanguageModel& policy() override { return policy_; }
  std::unique_ptr<sdk::LanguageModel> frozen_policy_copy() override {
    std::unique_ptr<model::CausalLm> copy = policy_.frozen_copy();
    if (on_frozen_model_) on_frozen_model_(*copy, "reference");
    return copy;
  }
  // On the policy's device and at its compute dtype, as a reference model must be.
  // A LoRA policy's own base directory is the policy with its adapters off:
  // the same weight tensors, no second copy.
  std::unique_ptr<sdk::LanguageModel> load_frozen_model(const std::string& model_dir) override {
    if (policy_.lora() && is_policy_base_dir(model_dir)) {
      logger_.info("lora", "reference model " + model_dir +
                               " is the policy's base: its weights with the adapters off (shared, not copied)");
      return policy_.base_model();
    }
    std::unique_ptr<model::CausalLm> model = model::CausalLm::load_hf_dir(model_dir, policy_.device())->frozen_copy();
    model->set_compute_dtype(policy_.compute_dtype());
    model->to_device(policy_.device());
    if (on_frozen_model_) on_frozen_model_(*model, "reference");
    return model;
  }
  at::Device device() const override { return policy_.device(); }
  at::ScalarType compute_dtype() const override { return policy_.compute_dtype(); }
  void all_reduce_sum(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    communicator_.all_reduce_sum(tensors);
  }
  at::Tensor all_gather(const at::Tensor& local) override;
  const sdk::GlobalBatch& global_batch() const override {
    if (!global_batch_) throw sdk::PluginError("global_batch: asked for outside prepare() and prepare_eval()");
    return *global_batch_;
  }
  void add_forward_tokens(int64_t tokens, int64_t model_parameters) override {
    forward_work_.tokens += tokens;
    forward_work_.flops += 2.0 * static_cast<double>(model_parameters) * static_cast<double>(tokens);
  }
  const sdk::Tokenizer& tokenizer() const override { return tokenizer_; }
  const sdk::ConfigValues& module_config() const override { return module_config_; }
  sdk::Logger& logger() override { return logger_; }
  std::unique_ptr<sdk::Progress> start_progress(std::string_view label, int64_t total) override;
  sdk::RolloutEngine& rollout_engine() override { return rollout_engine_; }
  generation::CausalLmRolloutEngine& policy_rollout_engine() { return rollout_engine_; }
  // Names are looked up where plugins are (plugin_search_dirs), after `extra_plugin_dirs`.
  std::unique_ptr<sdk::RewardLibrary> open_reward_library(const std::string& name_or_path) override {
    return load_reward_library(name_or_path, plugin_search_dirs(extra_plugin_dirs_));
  }
  // On the policy's device and at its compute dtype, as a reference model.
  std::unique_ptr<sdk::RewardModel> load_reward_model(const std::string& model_dir) override {
    return plugin::load_reward_model(model_dir, policy_.device(), policy_.compute_dtype(),
                                     [this](model::CausalLm& decoder) {
                                       if (on_frozen_model_) on_frozen_model_(decoder, "reward");
                                     });
  }
  std::unique_ptr<sdk::Environment> open_environment(const std::string& name_or_path) override {
    return load_environment(name_or_path, plugin_search_dirs(extra_plugin_dirs_));
  }
  // The examples this rank takes in a later step, from the run's sampler.
  std::vector<const sdk::Example*> upcoming_examples(int64_t steps_ahead) override {
    if (steps_ahead < 1) {
      throw sdk::PluginError("upcoming_examples: steps_ahead must be >= 1, got " + std::to_string(steps_ahead));
    }
    if (!example_source_) return sdk::Context::upcoming_examples(steps_ahead);
    return example_source_(run_info_.step + steps_ahead);
  }
  // Runs on every frozen model this context hands out, a reference's or a
  // reward model's decoder, with its role (sharding "full" shards them).
  using FrozenModelHook = std::function<void(model::CausalLm& model, const std::string& role)>;
  void set_frozen_model_hook(FrozenModelHook hook) { on_frozen_model_ = std::move(hook); }
  // What upcoming_examples reads: this rank's examples of an update step.
  using ExampleSource = std::function<std::vector<const sdk::Example*>(int64_t step)>;
  void set_example_source(ExampleSource source) { example_source_ = std::move(source); }
  void set_extra_plugin_dirs(std::vector<std::filesystem::path> dirs) { extra_plugin_dirs_ = std::move(dirs); }

  // The trainer moves the context to the step it is about to run; the
  // forward work counted so far (set-up, an evaluation) is not the step's.
  void set_step(int64_t step, int64_t epoch) {
    run_info_.step = step;
    run_info_.epoch = epoch;
    policy_.set_dropout_step(step);
    forward_work_ = {};
  }
  // What global_batch() returns until the next call: set before every
  // prepare() and prepare_eval() (core/train/global_batches.h).
  void set_global_batch(sdk::GlobalBatch batch) { global_batch_ = std::move(batch); }

  // The forward work plugins reported (add_forward_tokens) since set_step or
  // the last take, which resets it.
  struct ForwardWork {
    int64_t tokens = 0;
    double flops = 0.0;
  };
  ForwardWork take_forward_work() { return std::exchange(forward_work_, {}); }

 private:
  bool is_policy_base_dir(const std::string& model_dir) const {
    std::error_code error;
    return !policy_.source_dir().empty() && std::filesystem::equivalent(model_dir, policy_.source_dir(), error);
  }

  model::CausalLm& policy_;
  const sdk::Tokenizer& tokenizer_;
  const sdk::ConfigValues& module_config_;
  dist::Communicator& communicator_;
  sdk::RunInfo run_info_;
  HostLogger logger_;
  std::vector<std::filesystem::path> extra_plugin_dirs_;
  ExampleSource example_source_;
  std::optional<sdk::GlobalBatch> global_batch_;
  ForwardWork forward_work_;
  FrozenModelHook on_frozen_model_;
  generation::CausalLmRolloutEngine rollout_engine_{policy_, tokenizer_};
};

}  // namespace ptrain::plugin
