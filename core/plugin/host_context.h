// The core's implementation of sdk::Context for one run.
#pragma once

#include "core/model/causal_lm.h"
#include "core/plugin/host_logger.h"
#include "ptrain/sdk/context.h"

namespace ptrain::plugin {

class HostContext final : public sdk::Context {
 public:
  HostContext(model::CausalLm& policy, const sdk::Tokenizer& tokenizer, const sdk::ConfigValues& module_config,
              sdk::RankInfo rank_info, sdk::RunInfo run_info)
      : policy_(policy), tokenizer_(tokenizer), module_config_(module_config), rank_info_(rank_info),
        run_info_(run_info) {}

  sdk::RankInfo rank_info() const override { return rank_info_; }
  sdk::RunInfo run_info() const override { return run_info_; }
  sdk::LanguageModel& policy() override { return policy_; }
  std::unique_ptr<sdk::LanguageModel> frozen_policy_copy() override { return policy_.frozen_copy(); }
  const sdk::Tokenizer& tokenizer() const override { return tokenizer_; }
  const sdk::ConfigValues& module_config() const override { return module_config_; }
  sdk::Logger& logger() override { return logger_; }

  // The trainer moves the context to the step it is about to run.
  void set_step(int64_t step, int64_t epoch) {
    run_info_.step = step;
    run_info_.epoch = epoch;
  }

 private:
  model::CausalLm& policy_;
  const sdk::Tokenizer& tokenizer_;
  const sdk::ConfigValues& module_config_;
  sdk::RankInfo rank_info_;
  sdk::RunInfo run_info_;
  HostLogger logger_;
};

}  // namespace ptrain::plugin
