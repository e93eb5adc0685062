// DAPO's dynamic sampling with refill (Yu et al. 2025): a group whose
// G rewards are all equal (is_zero_std) has zero advantages and teaches
// nothing, so filter_zero_std_groups drops it; with max_generation_rounds
// = M > 1 the step then samples further groups until it holds as many
// informative groups as it has prompts (the global batch size B), or M
// rounds have run.
//
// Round 0 is the step's own global batch; round r ≥ 1 is the global batch of
// step + r in the epoch order (sdk::Context::upcoming_examples), each rank
// its part, sampled with generation indices r·G … r·G + G − 1 so that a
// prompt met again draws new completions. After each round the ranks sum
// their groups' informative flags, laid at their global positions, so every
// rank sees the same flags in global order (round, position in the batch);
// the informative groups are kept first come, first kept, up to B. Which
// groups are kept therefore depends on the rollouts and rewards only, never
// on the world size or the microbatches.
//
// Every group of round 0 stays (a flat one untrained, as with the filter
// alone); of later rounds only the kept groups do.
#pragma once

#include "grpo_config.h"
#include "grpo_rollouts.h"

#include "ptrain/sdk/context.h"
#include "ptrain/sdk/rewards.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ptrain::grpo {

// Which of a round's groups to keep. informative: the round's flags in
// global order; kept: informative groups kept so far (updated); target: how
// many the step wants. Flat groups are never kept by this.
std::vector<bool> keep_first_informative(const std::vector<bool>& informative, int64_t& kept, int64_t target);

// A rank's groups for the step, scored, with what the metrics report.
struct SampledGroups {
  std::vector<const sdk::Example*> examples;  // one per group (prompt)
  RolloutGroups groups;
  at::Tensor rewards;            // [P, G, F] float64
  int64_t groups_generated = 0;  // over every rank and round
  int64_t groups_kept = 0;       // informative groups trained on, over every rank
  int64_t rounds = 0;            // generation rounds run
};

// What scores a step's rollouts: the reward functions, and the environment
// whose episodes the rollouts are (null: single-turn completions).
struct RewardSources {
  const std::vector<std::unique_ptr<sdk::RewardFunction>>& functions;
  sdk::Environment* environment = nullptr;
};

// Collective (every rank the same number of times). Samples and scores the
// step's groups; with filter_zero_std_groups, refills them as above.
SampledGroups sample_groups(sdk::Context& ctx, const GrpoConfig& config, const RewardSources& sources,
                            const std::vector<const sdk::Example*>& examples);

}  // namespace ptrain::grpo
