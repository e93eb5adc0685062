// The reference log-probs ρ of a microbatch's pairs (dpo_loss.h), from one
// of three sources, or none when no loss of the run reads ρ:
//   live         a frozen reference model (reference_model, or a copy of the
//                initial policy) scores each microbatch without gradients;
//   precomputed  precompute_reference: every pair of the dataset is scored
//                once before training, cached in a file (dpo_reference_cache.h)
//                and looked up by Example::index; no model is kept;
//   TR-DPO       the live model, moved towards the policy before every
//                sync_reference_steps-th step: ref ← α·policy + (1 − α)·ref.
// Either way a microbatch's ρ arrives as [B, 4] float64 parts in
// ReferenceColumn order, computed when the microbatch is prepared.
#pragma once

#include "dpo_config.h"
#include "dpo_data.h"
#include "dpo_scoring.h"

#include "ptrain/sdk/context.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ptrain::dpo {

// Both sides' parts as one [B, 4] float64 tensor in ReferenceColumn order, and back.
at::Tensor stack_parts(const ScoredPairs& scored);
ScoredPairs unstack_parts(const at::Tensor& parts);

class ReferenceLogProbs {
 public:
  // Loads the live model when a loss needs ρ and it is not to be precomputed
  // (that loads its model only for the precomputation).
  void setup(sdk::Context& ctx, const DpoConfig& config);

  // Scores every pair of the dataset (examples[i] is pairs[i]'s example)
  // with the reference, or reuses the cache file at `path` when it was made
  // for the same model and data; then drops the live model. Collective.
  void precompute(sdk::Context& ctx, const std::vector<sdk::Example>& examples, const std::vector<TokenizedPair>& pairs,
                  const std::string& path);

  // Before a step's microbatches: TR-DPO's sync when due, and a check that a
  // configured precomputation ran.
  void begin_step(sdk::Context& ctx);

  // ρ's parts of the pairs of `batch`, whose examples are `examples` in
  // order: [B, 4] float64; undefined without a reference.
  at::Tensor parts_of(const PairBatch& batch, const std::vector<const sdk::Example*>& examples) const;

  bool holds_model() const { return model_ != nullptr; }

  // TR-DPO's state for the plugin state: the step of the last sync (−1:
  // none yet) and, once synced, the reference's weights.
  int64_t last_synced_step() const { return last_synced_step_; }
  std::vector<std::pair<std::string, at::Tensor>> synced_weights() const;
  void restore_sync(sdk::Context& ctx, int64_t last_synced_step,
                    const std::vector<std::pair<std::string, at::Tensor>>& tensors);

 private:
  DpoConfig config_;                           // the module's, copied at setup
  at::Device device_ = at::kCPU;               // where the live model scores (Context::device())
  std::unique_ptr<sdk::LanguageModel> model_;  // live reference; null when unused or precomputed
  bool precomputed_ = false;
  at::Tensor cached_;                            // [N, 4] float64 when precomputed
  std::unordered_map<int64_t, int64_t> row_of_;  // Example::index → row of cached_
  int64_t last_synced_step_ = -1;
};

}  // namespace ptrain::dpo
