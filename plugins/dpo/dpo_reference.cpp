#include "dpo_reference.h"

#include "dpo_reference_cache.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/reference_model.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <optional>

namespace ptrain::dpo {
namespace {

constexpr const char* kComponent = "dpo";
constexpr const char* kReferencePrefix = "reference/";  // TR-DPO's reference weights in the plugin state

// `batch` is collated on the host; the model scores on `device`, and the
// parts stay there.
at::Tensor reference_parts(sdk::LanguageModel& model, const PairBatch& batch, at::Device device) {
  const at::NoGradGuard no_grad;
  return stack_parts(score_pairs(model, pairs_on_device(batch, device)));
}

// Whether the cache at `path` holds this run's reference log-probs; if so,
// rank 0's `values` receive them. Rank 0 reads the cache; its verdict
// reaches every rank through one collective whatever it finds, and every
// rank throws when it refuses the file.
bool reuse_cache(sdk::Context& ctx, const std::string& path, const ReferenceFingerprint& fingerprint,
                 at::Tensor& values) {
  const sdk::RankInfo rank = ctx.rank_info();
  std::optional<ReferenceCache> cached;
  std::string mismatch;
  at::Tensor verdict = at::zeros({2}, at::kDouble);  // [usable, refused]
  if (rank.rank == 0) {
    cached = read_reference_cache(path);
    if (cached) mismatch = reference_cache_mismatch(cached->fingerprint, fingerprint);
    verdict[0] = cached && mismatch.empty() ? 1.0 : 0.0;
    verdict[1] = cached && !mismatch.empty() ? 1.0 : 0.0;
  }
  ctx.all_reduce_sum(verdict);
  if (verdict[1].item<double>() > 0.0) {
    if (rank.rank == 0) {
      throw sdk::Error(path + ": refusing the DPO reference log-prob cache: " + mismatch +
                       ". Delete the file to recompute it, or set module.reference_cache to another path");
    }
    throw sdk::Error(path + ": rank 0 refused the DPO reference log-prob cache (see its log)");
  }
  const bool usable = verdict[0].item<double>() > 0.0;
  if (usable && rank.rank == 0) values.copy_(cached->values);
  return usable;
}

// Rank r scores pairs r, r + R, r + 2R, ... into their rows of `values`
// ([N, 4]), micro_size pairs at a time, without gradients.
void score_rank_shard(sdk::Context& ctx, sdk::LanguageModel& model, const std::vector<TokenizedPair>& pairs,
                      int64_t micro_size, at::Tensor& values) {
  const sdk::RankInfo rank = ctx.rank_info();
  std::vector<int64_t> shard;
  for (int64_t i = rank.rank; i < static_cast<int64_t>(pairs.size()); i += rank.world_size) shard.push_back(i);
  const std::unique_ptr<sdk::Progress> progress =
      ctx.start_progress("dpo: reference log-probs (this rank's pairs)", static_cast<int64_t>(shard.size()));
  for (size_t begin = 0; begin < shard.size(); begin += static_cast<size_t>(micro_size)) {
    const size_t end = std::min(shard.size(), begin + static_cast<size_t>(micro_size));
    std::vector<TokenizedPair> group;
    for (size_t k = begin; k < end; ++k) group.push_back(pairs[shard[k]]);
    const at::Tensor parts = reference_parts(model, collate_pairs(group, ctx.tokenizer().pad_id(), true), ctx.device());
    for (size_t k = begin; k < end; ++k) values[shard[k]].copy_(parts[static_cast<int64_t>(k - begin)]);
    progress->advance(static_cast<int64_t>(end - begin));
  }
  progress->finish();
}

// TR-DPO blends whole weights; a LoRA policy's reference shares its frozen
// base weights, so the first sync would fail hours into the run. The SDK
// shows a LoRA policy by its PEFT adapter names (DESIGN.md §6).
void check_sync_fits(sdk::Context& ctx, const DpoConfig& config) {
  if (!config.sync_reference) return;
  for (const auto& [name, tensor] : ctx.policy().named_parameters()) {
    if (name.find(".lora_A.") == std::string::npos) continue;
    throw sdk::ConfigError(ctx.module_config().where("sync_reference") +
                           " = true cannot be combined with key 'lora.rank' > 0: TR-DPO blends the policy's whole "
                           "weights into the reference, and a LoRA run trains adapters on frozen base weights the "
                           "reference shares; set module.sync_reference = false, or train without [lora]");
  }
}

// A reference_cache the user names is read now, before the run starts: a
// file that is no cache is a config error naming the key, and stays as it is.
void check_configured_cache(sdk::Context& ctx, const DpoConfig& config) {
  if (!config.precompute_reference || !config.needs_reference() || config.reference_cache.empty()) return;
  try {
    read_reference_cache(config.reference_cache);
  } catch (const sdk::Error& error) {
    throw sdk::ConfigError(ctx.module_config().where("reference_cache") + ": " + error.what() +
                           "; name a cache ptrain wrote, or a path that does not exist yet (ptrain writes the cache "
                           "there)");
  }
}

}  // namespace

at::Tensor stack_parts(const ScoredPairs& scored) {
  return at::stack({scored.chosen.shared, scored.chosen.rest, scored.rejected.shared, scored.rejected.rest}, 1)
      .to(at::kDouble);  // [B, 4]
}

ScoredPairs unstack_parts(const at::Tensor& parts) {
  return {{parts.select(1, kChosenShared), parts.select(1, kChosenRest)},
          {parts.select(1, kRejectedShared), parts.select(1, kRejectedRest)}};
}

void ReferenceLogProbs::setup(sdk::Context& ctx, const DpoConfig& config) {
  config_ = config;
  check_sync_fits(ctx, config_);
  check_configured_cache(ctx, config_);
  device_ = ctx.device();
  if (config_.needs_reference() && !config_.precompute_reference) {
    model_ = sdk::load_reference_model(ctx, config_.reference_model, ctx.module_config().where("reference_model"));
  }
}

void ReferenceLogProbs::precompute(sdk::Context& ctx, const std::vector<sdk::Example>& examples,
                                   const std::vector<TokenizedPair>& pairs, const std::string& path) {
  // The initial policy is the default reference; nothing has trained it yet.
  std::unique_ptr<sdk::LanguageModel> loaded;
  if (!config_.reference_model.empty()) loaded = ctx.load_frozen_model(config_.reference_model);
  sdk::LanguageModel& model = loaded ? *loaded : ctx.policy();
  const ReferenceFingerprint fingerprint = fingerprint_of(model, pairs);
  const auto num_pairs = static_cast<int64_t>(pairs.size());

  at::Tensor values = at::zeros({num_pairs, kReferenceColumns}, at::kDouble);
  const bool usable = reuse_cache(ctx, path, fingerprint, values);
  if (!usable) score_rank_shard(ctx, model, pairs, config_.reference_micro_size, values);
  ctx.all_reduce_sum(values);
  if (!usable && ctx.rank_info().rank == 0) write_reference_cache(path, {fingerprint, values});

  cached_ = values;
  row_of_.clear();
  for (int64_t row = 0; row < num_pairs; ++row) row_of_[examples[row].index] = row;
  precomputed_ = true;
  model_.reset();  // nothing keeps a reference model from here on
  ctx.logger().info(kComponent, std::string(usable ? "reused" : "computed") + " reference log-probs of " +
                                    std::to_string(num_pairs) + " pairs (" + path + ")");
}

void ReferenceLogProbs::begin_step(sdk::Context& ctx) {
  const int64_t step = ctx.run_info().step;
  // TR-DPO syncs after every sync_reference_steps-th update, i.e. before step k·τ (0-based) runs.
  if (config_.sync_reference && step != 0 && step % config_.sync_reference_steps == 0 && step != last_synced_step_) {
    model_->soft_update_from(ctx.policy(), config_.sync_reference_alpha);
    last_synced_step_ = step;
    ctx.logger().info(kComponent, "step " + std::to_string(step + 1) + ": reference ← " +
                                      std::to_string(config_.sync_reference_alpha) + "·policy + (1 − α)·reference");
  }
  if (config_.precompute_reference && config_.needs_reference() && !precomputed_) {
    throw sdk::Error("dpo: precompute_reference is set but prepare_dataset() did not run before the first step");
  }
}

at::Tensor ReferenceLogProbs::parts_of(const PairBatch& batch, const std::vector<const sdk::Example*>& examples) const {
  if (precomputed_) {
    std::vector<int64_t> rows;
    for (const sdk::Example* example : examples) {
      const auto it = row_of_.find(example->index);
      if (it == row_of_.end()) {
        throw sdk::Error(example->location + ": no precomputed reference log-probs for this example");
      }
      rows.push_back(it->second);
    }
    return cached_.index_select(0, at::tensor(rows, at::kLong));
  }
  if (model_) return reference_parts(*model_, batch, device_);
  return {};
}

std::vector<std::pair<std::string, at::Tensor>> ReferenceLogProbs::synced_weights() const {
  std::vector<std::pair<std::string, at::Tensor>> weights;
  // Only a synced reference differs from what setup() builds again.
  if (config_.sync_reference && model_ && last_synced_step_ >= 0) {
    for (const auto& [name, tensor] : model_->named_parameters()) weights.emplace_back(kReferencePrefix + name, tensor);
  }
  return weights;
}

void ReferenceLogProbs::restore_sync(sdk::Context& ctx, int64_t last_synced_step,
                                     const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  last_synced_step_ = last_synced_step;
  if (!config_.sync_reference || !model_ || last_synced_step_ < 0) return;
  std::unordered_map<std::string, at::Tensor> saved;
  for (const auto& [name, tensor] : tensors) saved[name] = tensor;
  const at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : model_->named_parameters()) {
    const auto it = saved.find(kReferencePrefix + name);
    if (it == saved.end() || !it->second.sizes().equals(tensor.sizes())) {
      throw sdk::PluginError("dpo: the checkpoint's plugin state lacks the synced reference weight '" +
                             std::string(kReferencePrefix) + name + "' of shape " + c10::str(tensor.sizes()) +
                             "; it was not saved by a TR-DPO run of this model");
    }
    tensor.copy_(it->second);
  }
  ctx.logger().info(kComponent,
                    "resumed the TR-DPO reference as synced at step " + std::to_string(last_synced_step_ + 1));
}

}  // namespace ptrain::dpo
