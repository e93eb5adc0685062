#include "dpo_config.h"

#include "ptrain/sdk/errors.h"

#include <algorithm>
#include <cmath>

namespace ptrain::dpo {
namespace {

std::string joined_names() {
  std::string joined;
  for (const std::string& name : loss_type_names()) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

LossType parse_loss_type(const sdk::ConfigValues& values, const std::string& name) {
  const auto& names = loss_type_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    throw sdk::ConfigError(values.where("loss") + ": unknown loss '" + name + "' (known losses: " + joined_names() +
                           ")");
  }
  return static_cast<LossType>(it - names.begin());
}

}  // namespace

const std::vector<std::string>& loss_type_names() {
  static const std::vector<std::string> names{"sigmoid",  "ipo",          "hinge",     "robust",   "exo_pair",
                                              "nca_pair", "bco_pair",     "sppo_hard", "apo_zero", "apo_down",
                                              "discopop", "sigmoid_norm", "simpo",     "sft"};
  return names;
}

const char* loss_type_name(LossType type) { return loss_type_names().at(static_cast<size_t>(type)).c_str(); }

bool DpoConfig::has_loss(LossType type) const { return std::find(losses.begin(), losses.end(), type) != losses.end(); }

bool DpoConfig::needs_reference() const {
  if (reference_free) return false;
  return std::any_of(losses.begin(), losses.end(),
                     [](LossType type) { return type != LossType::kSft && type != LossType::kSimpo; });
}

void declare_dpo_config(sdk::ConfigSchema& schema) {
  schema.add_float("beta", 0.1, "β: scale of the implicit reward β·(log π − log π_ref); SimPO usually wants ~2", 0.0);
  schema.add_string_list("loss", std::vector<std::string>{"sigmoid"},
                         "the losses to combine, e.g. [\"sigmoid\", \"sft\"] (docs/dpo.md)", loss_type_names());
  schema.add_float_list("loss_weights", std::vector<double>{},
                        "weights, one per loss; the step loss is Σ weight·(mean of that loss); empty: all 1", 0.0);
  schema.add_float("label_smoothing", 0.0,
                   "ε: probability that a preference label is flipped (sigmoid/cDPO, robust, exo_pair, "
                   "sigmoid_norm, simpo)",
                   0.0, 0.5);
  schema.add_float("gamma", 0.5, "SimPO's target reward margin γ", 0.0);
  schema.add_float("discopop_tau", 0.05, "DiscoPOP's temperature τ", 1e-9);
  schema.add_float("ld_alpha", 1.0,
                   "LD-DPO: weight of completion tokens past the shorter answer's length in sequence log-probs; "
                   "1 turns it off",
                   0.0, 1.0);
  schema.add_bool("use_weighting", false,
                  "WPO: weight each pair by its (clamped) policy probability, without gradient");
  schema.add_bool("reference_free", false, "use log π_ref = 0 instead of a reference model");
  schema.add_string("reference_model", "",
                    "a Hugging Face model directory to use as the reference; empty: a frozen copy of the initial "
                    "policy");
  schema.add_bool("precompute_reference", false,
                  "compute the reference log-probs of the whole dataset once before training, cache them, and "
                  "free the reference model");
  schema.add_string("reference_cache", "",
                    "the precomputed reference cache file; empty: <output_dir>/reference_logps.json");
  schema.add_int("reference_micro_size", 16, "pairs per forward while precomputing reference log-probs", 1);
  schema.add_bool("concatenated", true, "score chosen and rejected in one forward (false: two forwards)");
  schema.add_bool("sync_reference", false, "TR-DPO: mix the policy into the reference every sync_reference_steps");
  schema.add_int("sync_reference_steps", 512, "TR-DPO: update steps between reference syncs", 1);
  schema.add_float("sync_reference_alpha", 0.6, "TR-DPO: reference ← α·policy + (1−α)·reference", 0.0, 1.0);
  schema.add_string("loss_agg", "pair",
                    "pair: the step loss is the mean over the global batch's pairs; token: pairs weighted by their "
                    "chosen + rejected completion tokens",
                    {"pair", "token"});
  schema.add_int("max_prompt_length", 0,
                 "prompt tokens (its end) always kept when a pair exceeds data.max_length; 0: half of max_length", 0);
}

DpoConfig read_dpo_config(const sdk::ConfigValues& values, int64_t max_length) {
  DpoConfig config;
  config.beta = values.get_float("beta");
  config.label_smoothing = values.get_float("label_smoothing");
  config.gamma = values.get_float("gamma");
  config.discopop_tau = values.get_float("discopop_tau");
  config.ld_alpha = values.get_float("ld_alpha");
  config.use_weighting = values.get_bool("use_weighting");
  config.reference_free = values.get_bool("reference_free");
  config.reference_model = values.get_string("reference_model");
  config.precompute_reference = values.get_bool("precompute_reference");
  config.reference_cache = values.get_string("reference_cache");
  config.reference_micro_size = values.get_int("reference_micro_size");
  config.concatenated = values.get_bool("concatenated");
  config.sync_reference = values.get_bool("sync_reference");
  config.sync_reference_steps = values.get_int("sync_reference_steps");
  config.sync_reference_alpha = values.get_float("sync_reference_alpha");
  config.loss_agg = values.get_string("loss_agg") == "token" ? PairAggregation::kToken : PairAggregation::kPair;

  config.losses.clear();
  for (const std::string& name : values.get_string_list("loss")) {
    const LossType type = parse_loss_type(values, name);
    if (config.has_loss(type)) throw sdk::ConfigError(values.where("loss") + ": loss '" + name + "' is listed twice");
    config.losses.push_back(type);
  }
  if (config.losses.empty()) {
    throw sdk::ConfigError(values.where("loss") + ": expected at least one loss (one of: " + joined_names() + ")");
  }

  const std::vector<double>& weights = values.get_float_list("loss_weights");
  config.loss_weights.assign(config.losses.size(), 1.0);
  if (!weights.empty()) {
    if (weights.size() != config.losses.size()) {
      throw sdk::ConfigError(values.where("loss_weights") + ": expected " + std::to_string(config.losses.size()) +
                             " weights (one per loss), got " + std::to_string(weights.size()));
    }
    for (size_t i = 0; i < weights.size(); ++i) {
      if (!std::isfinite(weights[i]) || weights[i] < 0.0) {
        throw sdk::ConfigError(values.where("loss_weights") + ": loss_weights[" + std::to_string(i) +
                               "] must be a finite number >= 0, got " + sdk::format_config_value(weights[i]));
      }
    }
    config.loss_weights = weights;
  }

  if (config.has_loss(LossType::kRobust) && config.label_smoothing >= 0.5) {
    throw sdk::ConfigError(values.where("label_smoothing") + ": the robust loss divides by 1 − 2ε, so ε must be < 0.5");
  }
  if (config.reference_free && !config.reference_model.empty()) {
    throw sdk::ConfigError(values.where("reference_model") +
                           ": a reference model is set but module.reference_free = true; choose one");
  }
  if (config.sync_reference) {
    if (!config.needs_reference()) {
      throw sdk::ConfigError(values.where("sync_reference") +
                             ": TR-DPO syncs a reference model, but this run uses none (reference_free, or only "
                             "simpo / sft losses)");
    }
    if (config.precompute_reference) {
      throw sdk::ConfigError(values.where("sync_reference") +
                             ": a synced reference changes during training, so its log-probs cannot be precomputed; "
                             "set module.precompute_reference = false");
    }
  }

  const int64_t prompt_limit = values.get_int("max_prompt_length");
  config.max_prompt_length = prompt_limit > 0 ? prompt_limit : max_length / 2;
  if (config.max_prompt_length > max_length - 2) {
    throw sdk::ConfigError(values.where("max_prompt_length") +
                           ": must leave room for <bos> and a completion token: <= " + std::to_string(max_length - 2) +
                           " (data.max_length − 2), got " + std::to_string(config.max_prompt_length));
  }
  return config;
}

}  // namespace ptrain::dpo
