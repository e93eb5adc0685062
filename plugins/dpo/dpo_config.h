// [module] settings of the DPO plugin, read once into a typed struct.
#pragma once

#include "ptrain/sdk/config_schema.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::dpo {

// Every loss a run may combine; dpo_loss.h gives each formula and docs/dpo.md its paper.
enum class LossType {
  kSigmoid,
  kIpo,
  kHinge,
  kRobust,
  kExoPair,
  kNcaPair,
  kBcoPair,
  kSppoHard,
  kApoZero,
  kApoDown,
  kDiscopop,
  kSigmoidNorm,
  kSimpo,
  kSft,
};

const char* loss_type_name(LossType type);

// One unit per pair (the step loss is the mean over the global batch's
// pairs), or one per completion token (pairs weighted by their tokens).
enum class PairAggregation { kPair, kToken };

// The defaults live with the keys (dpo_config.cpp); the zeros below are only
// the state of a config nothing was read into.
struct DpoConfig {
  double beta = 0.0;
  std::vector<LossType> losses;
  std::vector<double> loss_weights;  // one per loss (resolved: never empty)
  double label_smoothing = 0.0;      // ε of cDPO / robust / exo_pair
  double gamma = 0.0;                // SimPO's target reward margin
  double discopop_tau = 0.0;
  double ld_alpha = 0.0;       // LD-DPO weight of tokens past the shorter answer; 1: off
  bool use_weighting = false;  // WPO
  bool reference_free = false;
  std::string reference_model;  // a model directory; empty: a frozen copy of the initial policy
  bool precompute_reference = false;
  std::string reference_cache;       // cache file; empty: <output_dir>/reference_logps.json
  int64_t reference_micro_size = 0;  // pairs per no-grad forward while precomputing
  bool sync_reference = false;       // TR-DPO
  int64_t sync_reference_steps = 0;
  double sync_reference_alpha = 0.0;
  PairAggregation loss_agg = PairAggregation::kPair;
  bool concatenated = false;      // chosen and rejected in one forward
  int64_t max_prompt_length = 0;  // prompt tokens always kept when a pair is too long (resolved: never 0)

  bool has_loss(LossType type) const;
  // A loss other than `sft`, `simpo` uses reference log-probs, unless reference_free.
  bool needs_reference() const;
};

void declare_dpo_config(sdk::ConfigSchema& schema);

// Throws sdk::ConfigError naming the file:line and key of a bad value or of
// a conflicting combination. `max_length` is data.max_length.
DpoConfig read_dpo_config(const sdk::ConfigValues& values, int64_t max_length);

// Every key at its default, resolved as read_dpo_config() resolves it.
DpoConfig default_dpo_config(int64_t max_length);

}  // namespace ptrain::dpo
