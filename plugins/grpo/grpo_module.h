// The GRPO TrainModule (Shao et al. 2024), with the options of TRL's
// GRPOTrainer and verl (docs/grpo.md).
//
// prepare() of a generation step samples G completions for each of the
// rank's prompts at once ("generate once per effective batch"), scores them,
// computes group advantages (a prompt's group never leaves its rank; the
// batch-level statistics come from one all-reduce of sums), then,
// microbatch by microbatch and without gradients, the old-policy log-probs
// (num_iterations > 1 or top_entropy_quantile < 1) and the reference
// log-probs (beta > 0) through target_log_probs, never a full log-softmax.
// The next num_iterations − 1 steps reuse those rollouts and their stored
// old log-probs instead of the prompts the sampler gives them.
//
// With filter_zero_std_groups and max_generation_rounds > 1 the generation
// step refills the batch with informative groups from the prompts of later
// global batches (grpo_dynamic_sampling.h), the same groups on any world size.
//
// A microbatch holds completions (batch.micro_size counts sequences, not
// prompts). Its units follow loss_type through the SDK's aggregation modes:
//   grpo → seq_mean_token_mean, bnpo / dapo → token_mean,
//   dr_grpo → seq_mean_token_sum_norm with C = max_completion_length,
// so the step loss is exact under any split (docs/architecture.md#the-update-step). Completions
// dropped by mask_truncated_completions or filter_zero_std_groups have no
// trained token and add no unit.
//
// With an environment every rollout is a multi-turn episode
// (grpo_episodes.h): only the policy's own tokens are trained and counted,
// and the environment's reward is the last reward column.
#pragma once

#include "grpo_config.h"
#include "grpo_loss.h"

#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/environment.h"
#include "ptrain/sdk/rewards.h"
#include "ptrain/sdk/train_module.h"

#include <array>
#include <memory>
#include <optional>
#include <vector>

namespace ptrain::grpo {

struct GrpoMicrobatch final : sdk::Microbatch {
  sdk::TokenBatch tokens;    // [B, T]; loss_mask: completion tokens of trained completions
  at::Tensor advantages;     // [B] float64
  at::Tensor old_log_probs;  // [B, T] float64; undefined when the current policy (detached) is π_old
  at::Tensor ref_log_probs;  // [B, T] float64; undefined when beta = 0
  at::Tensor entropy_mask;   // [B, T] bool; undefined when top_entropy_quantile = 1
  // Per completion, for metrics.
  at::Tensor rewards;           // [B] float64, the weighted sum
  at::Tensor function_rewards;  // [B, F] float64
  at::Tensor group_stds;        // [B] float64, std of its group's summed rewards
  at::Tensor lengths;           // [B] float64, completion tokens
  at::Tensor truncated;         // [B] bool
  at::Tensor turns;             // [B] float64, assistant turns of the episode (1 without an environment)
  bool evaluation = false;      // held-out completions (prepare_eval): one per prompt, no groups

  void to_device(at::Device device) override;
};

// One sampled completion and what the loss and metrics need of it.
struct ScoredCompletion {
  int64_t prompt_index = 0;      // the example's index in the dataset
  int64_t generation_index = 0;  // r·G + k: completion k of generation round r
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> completion_ids;
  std::vector<uint8_t> policy_mask;  // per completion token, 1: sampled by the policy; empty: every token is
  int64_t turns = 1;                 // assistant turns (an episode with an environment may take several)
  bool truncated = false;
  bool trained = true;  // adds loss units
  double advantage = 0.0;
  double reward = 0.0;
  std::vector<double> function_rewards;
  double group_std = 0.0;
  at::Tensor old_log_probs;  // [n] float64, or undefined
  at::Tensor ref_log_probs;  // [n] float64, or undefined
  at::Tensor entropies;      // [n] float32 under the generating policy, or undefined
  at::Tensor entropy_keep;   // [n] bool, or undefined
};

// The per-token terms of a microbatch under the current policy, before
// aggregation (microbatch_loss sums them).
struct MicrobatchTerms {
  TokenLoss token_loss;
  at::Tensor entropy;  // [B, T] of the current policy; undefined when the model gives none
};

class GrpoModule final : public sdk::TrainModule {
 public:
  void setup(sdk::Context& ctx) override;
  std::vector<sdk::MetricSpec> metric_specs() const override;
  void check_example(const sdk::Example& example) const override;
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override;
  // Greedy completions (eval_temperature) of the held-out prompts, one per
  // prompt, scored by the reward functions: eval/reward and the rest.
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare_eval(sdk::Context& ctx,
                                                             const std::vector<const sdk::Example*>& examples,
                                                             const sdk::MicrobatchPlan& plan) override;
  // One term, "policy": the clipped surrogate with its KL penalty per token, aggregated by loss_type.
  std::vector<sdk::LossTerm> loss_terms() const override;
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override;
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override;
  // num_iterations: the rollouts of a cycle are not saved, so a checkpoint
  // resumes exactly only at a cycle's start (docs/grpo.md).
  int64_t checkpoint_multiple() const override { return config_.num_iterations; }

  // One forward of the policy over `batch` and the objective's terms per token.
  MicrobatchTerms token_terms(sdk::Context& ctx, const GrpoMicrobatch& batch) const;

  const GrpoConfig& config() const { return config_; }
  // The rollouts of the latest generation step on this rank, in request order.
  const std::vector<ScoredCompletion>& completions() const { return completions_; }

 private:
  // A generation step: rollouts and their rewards (grpo_rollouts.h), then
  // advantages (grpo_advantages.h), into completions_.
  void generate_and_score(sdk::Context& ctx, const std::vector<const sdk::Example*>& examples);
  // completions_ split by the plan and collated; `score`: old and reference
  // log-probs computed first (a generation step).
  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches_of_completions(sdk::Context& ctx,
                                                                            const sdk::MicrobatchPlan& plan,
                                                                            bool score);
  void score_without_gradients(sdk::Context& ctx, const std::vector<std::vector<int64_t>>& groups);
  void select_high_entropy_tokens(sdk::Context& ctx);
  std::unique_ptr<GrpoMicrobatch> collate(const std::vector<int64_t>& members) const;

  GrpoConfig config_;
  std::optional<sdk::ChatTemplate> chat_template_;  // the tokenizer's, copied at setup
  bool tokenizer_has_bos_ = false;
  std::vector<std::unique_ptr<sdk::RewardFunction>> reward_functions_;
  std::unique_ptr<sdk::Environment> environment_;  // only with module.environment
  std::unique_ptr<sdk::LanguageModel> reference_;  // only when beta > 0
  std::vector<ScoredCompletion> completions_;
  std::vector<double> function_batch_stds_;  // rewards/<fn>/std over the global batch
  std::array<double, 3> sampling_counts_{};  // groups generated and kept, generation rounds (global)
  int64_t generated_step_ = -1;
};

}  // namespace ptrain::grpo
