#include "grpo_dynamic_sampling.h"

#include "grpo_advantages.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

namespace ptrain::grpo {
namespace {

constexpr const char* kComponent = "grpo";

// One rank's groups of one generation round, scored.
struct Round {
  std::vector<const sdk::Example*> examples;
  RolloutGroups groups;
  at::Tensor rewards;  // [P, G, F]
};

Round sample_round(sdk::Context& ctx, const GrpoConfig& config,
                   const std::vector<std::unique_ptr<sdk::RewardFunction>>& functions,
                   std::vector<const sdk::Example*> examples, int64_t round) {
  Round out;
  out.examples = std::move(examples);
  out.groups = generate_rollouts(ctx, config, out.examples, round * config.num_generations);
  out.rewards = score_rollouts(ctx.tokenizer(), functions, reward_entries(config), out.examples, out.groups);
  return out;
}

// Every rank's informative flags of a round, in global order: two sums over
// the ranks (the groups per rank, then the flags at their offsets).
// `offset` receives this rank's first global position.
std::vector<bool> global_informative(sdk::Context& ctx, const GrpoConfig& config, const Round& round, int64_t& offset) {
  const sdk::RankInfo rank = ctx.rank_info();
  const auto local = static_cast<int64_t>(round.examples.size());
  at::Tensor counts = at::zeros({rank.world_size}, at::kDouble);
  counts[rank.rank] = static_cast<double>(local);
  ctx.all_reduce_sum(counts);
  offset = static_cast<int64_t>(counts.narrow(0, 0, rank.rank).sum().item<double>());
  at::Tensor flags = at::zeros({static_cast<int64_t>(counts.sum().item<double>())}, at::kDouble);
  if (local > 0) {
    const at::Tensor summed = (round.rewards * at::tensor(config.reward_weights, at::kDouble)).sum(2);  // [P, G]
    flags.narrow(0, offset, local).copy_((group_std(summed) > kZeroStdTolerance).to(at::kDouble));
  }
  ctx.all_reduce_sum(flags);
  const double* summed_flags = flags.data_ptr<double>();
  std::vector<bool> informative;
  for (int64_t i = 0; i < flags.size(0); ++i) informative.push_back(summed_flags[i] > 0.5);
  return informative;
}

// Appends the groups `keep` selects (this rank's, from position `offset` of the round's global flags).
void append_kept(SampledGroups& out, std::vector<at::Tensor>& rewards, const Round& round,
                 const std::vector<bool>& keep, int64_t offset) {
  const int64_t g = round.groups.num_generations;
  std::vector<int64_t> rows;
  for (size_t p = 0; p < round.examples.size(); ++p) {
    if (!keep[static_cast<size_t>(offset) + p]) continue;
    rows.push_back(static_cast<int64_t>(p));
    out.examples.push_back(round.examples[p]);
    out.groups.prompt_texts.push_back(round.groups.prompt_texts[p]);
    for (int64_t k = 0; k < g; ++k) {
      const size_t i = p * static_cast<size_t>(g) + static_cast<size_t>(k);
      out.groups.requests.push_back(round.groups.requests[i]);
      out.groups.rollouts.push_back(round.groups.rollouts[i]);
    }
  }
  if (!rows.empty()) rewards.push_back(round.rewards.index_select(0, at::tensor(rows, at::kLong)));
}

int64_t count_true(const std::vector<bool>& flags) {
  int64_t n = 0;
  for (const bool flag : flags) n += flag ? 1 : 0;
  return n;
}

}  // namespace

std::vector<bool> keep_first_informative(const std::vector<bool>& informative, int64_t& kept, int64_t target) {
  std::vector<bool> keep(informative.size(), false);
  for (size_t i = 0; i < informative.size() && kept < target; ++i) {
    if (informative[i]) {
      keep[i] = true;
      ++kept;
    }
  }
  return keep;
}

SampledGroups sample_groups(sdk::Context& ctx, const GrpoConfig& config,
                            const std::vector<std::unique_ptr<sdk::RewardFunction>>& functions,
                            const std::vector<const sdk::Example*>& examples) {
  Round first = sample_round(ctx, config, functions, examples, 0);
  SampledGroups out;
  out.examples = first.examples;
  out.groups = first.groups;
  out.rewards = first.rewards;
  out.rounds = 1;
  if (!config.filter_zero_std_groups) return out;

  // Round 0's groups all stay; its informative ones count towards the target.
  int64_t offset = 0;
  const std::vector<bool> informative = global_informative(ctx, config, first, offset);
  const auto target = static_cast<int64_t>(informative.size());
  out.groups_generated = target;
  out.groups_kept = count_true(informative);
  std::vector<at::Tensor> rewards{first.rewards};
  for (int64_t r = 1; r < config.max_generation_rounds && out.groups_kept < target; ++r) {
    const Round round = sample_round(ctx, config, functions, ctx.upcoming_examples(r), r);
    const std::vector<bool> flags = global_informative(ctx, config, round, offset);
    append_kept(out, rewards, round, keep_first_informative(flags, out.groups_kept, target), offset);
    out.groups_generated += static_cast<int64_t>(flags.size());
    out.rounds = r + 1;
  }
  out.rewards = at::cat(rewards);
  if (out.rounds > 1 && out.groups_kept < target) {
    ctx.logger().info(kComponent, "step " + std::to_string(ctx.run_info().step) + ": " +
                                      std::to_string(out.groups_kept) + " of " + std::to_string(target) +
                                      " groups informative after max_generation_rounds = " +
                                      std::to_string(config.max_generation_rounds) + " rounds");
  }
  return out;
}

}  // namespace ptrain::grpo
