#include "dpo_config.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/config_binder.h"

#include <algorithm>
#include <cmath>

namespace ptrain::dpo {
namespace {

const sdk::Choices<LossType>& loss_choices() {
  static const sdk::Choices<LossType> choices{
      {"sigmoid", LossType::kSigmoid},     {"ipo", LossType::kIpo},           {"hinge", LossType::kHinge},
      {"robust", LossType::kRobust},       {"exo_pair", LossType::kExoPair},  {"nca_pair", LossType::kNcaPair},
      {"bco_pair", LossType::kBcoPair},    {"sppo_hard", LossType::kSppoHard}, {"apo_zero", LossType::kApoZero},
      {"apo_down", LossType::kApoDown},    {"discopop", LossType::kDiscopop}, {"sigmoid_norm", LossType::kSigmoidNorm},
      {"simpo", LossType::kSimpo},         {"sft", LossType::kSft}};
  return choices;
}

const sdk::ConfigBinder<DpoConfig>& binder() {
  using C = DpoConfig;
  static const auto binder =
      sdk::ConfigBinder<C>()
          .key("beta", &C::beta, 0.1, "β: scale of the implicit reward β·(log π − log π_ref); SimPO usually wants ~2",
               sdk::at_least(0.0))
          .choice("loss", &C::losses, loss_choices(), std::vector<LossType>{LossType::kSigmoid},
                  "the losses to combine, e.g. [\"sigmoid\", \"sft\"] (docs/dpo.md)")
          .key("loss_weights", &C::loss_weights, std::vector<double>{},
               "weights, one per loss; the step loss is Σ weight·(mean of that loss); empty: all 1",
               sdk::at_least(0.0))
          .key("label_smoothing", &C::label_smoothing, 0.0,
               "ε: probability that a preference label is flipped (sigmoid/cDPO, robust, exo_pair, sigmoid_norm, "
               "simpo)",
               sdk::between(0.0, 0.5))
          .key("gamma", &C::gamma, 0.5, "SimPO's target reward margin γ", sdk::at_least(0.0))
          .key("discopop_tau", &C::discopop_tau, 0.05, "DiscoPOP's temperature τ", sdk::at_least(1e-9))
          .key("ld_alpha", &C::ld_alpha, 1.0,
               "LD-DPO: weight of completion tokens past the shorter answer's length in sequence log-probs; 1 turns "
               "it off",
               sdk::between(0.0, 1.0))
          .key("use_weighting", &C::use_weighting, false,
               "WPO: weight each pair by its (clamped) policy probability, without gradient")
          .key("reference_free", &C::reference_free, false, "use log π_ref = 0 instead of a reference model")
          .key("reference_model", &C::reference_model, "",
               "a Hugging Face model directory to use as the reference; empty: a frozen copy of the initial policy")
          .key("precompute_reference", &C::precompute_reference, false,
               "compute the reference log-probs of the whole dataset once before training, cache them, and free "
               "the reference model")
          .key("reference_cache", &C::reference_cache, "",
               "the precomputed reference cache file; empty: <output_dir>/reference_logps.json")
          .key("reference_micro_size", &C::reference_micro_size, 16,
               "pairs per forward while precomputing reference log-probs", sdk::at_least(1))
          .key("concatenated", &C::concatenated, true,
               "score chosen and rejected in one forward (false: two forwards)")
          .key("sync_reference", &C::sync_reference, false,
               "TR-DPO: mix the policy into the reference every sync_reference_steps")
          .key("sync_reference_steps", &C::sync_reference_steps, 512, "TR-DPO: update steps between reference syncs",
               sdk::at_least(1))
          .key("sync_reference_alpha", &C::sync_reference_alpha, 0.6,
               "TR-DPO: reference ← α·policy + (1−α)·reference", sdk::between(0.0, 1.0))
          .choice("loss_agg", &C::loss_agg,
                  sdk::Choices<PairAggregation>{{"pair", PairAggregation::kPair}, {"token", PairAggregation::kToken}},
                  PairAggregation::kPair,
                  "pair: the step loss is the mean over the global batch's pairs; token: pairs weighted by their "
                  "chosen + rejected completion tokens")
          .key("max_prompt_length", &C::max_prompt_length, 0,
               "prompt tokens (its end) always kept when a pair exceeds data.max_length; 0: half of max_length",
               sdk::at_least(0));
  return binder;
}

std::string joined_names() {
  std::string joined;
  for (const auto& [name, type] : loss_choices()) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

// Each loss at most once, and at least one.
void check_losses(const sdk::ConfigValues& values, const std::vector<LossType>& losses) {
  for (size_t i = 0; i < losses.size(); ++i) {
    if (std::count(losses.begin(), losses.begin() + static_cast<std::ptrdiff_t>(i), losses[i]) > 0) {
      throw sdk::ConfigError(values.where("loss") + ": loss '" + loss_type_name(losses[i]) + "' is listed twice");
    }
  }
  if (losses.empty()) {
    throw sdk::ConfigError(values.where("loss") + ": expected at least one loss (one of: " + joined_names() + ")");
  }
}

}  // namespace

const char* loss_type_name(LossType type) { return sdk::choice_name(loss_choices(), type).c_str(); }

bool DpoConfig::has_loss(LossType type) const { return std::find(losses.begin(), losses.end(), type) != losses.end(); }

bool DpoConfig::needs_reference() const {
  if (reference_free) return false;
  return std::any_of(losses.begin(), losses.end(),
                     [](LossType type) { return type != LossType::kSft && type != LossType::kSimpo; });
}

void declare_dpo_config(sdk::ConfigSchema& schema) { binder().declare(schema); }

DpoConfig default_dpo_config(int64_t max_length) {
  return read_dpo_config(sdk::ConfigValues::defaults_of(binder().schema(), "module"), max_length);
}

namespace {

// loss_weights as given (each finite and >= 0, one per loss), or all 1.
std::vector<double> resolve_loss_weights(const sdk::ConfigValues& values, const DpoConfig& config) {
  const std::vector<double>& weights = config.loss_weights;
  if (weights.empty()) return std::vector<double>(config.losses.size(), 1.0);
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
  return weights;
}

// The reference options that contradict each other or the losses.
void check_reference_options(const sdk::ConfigValues& values, const DpoConfig& config) {
  if (config.reference_free && !config.reference_model.empty()) {
    throw sdk::ConfigError(values.where("reference_model") +
                           ": a reference model is set but module.reference_free = true; choose one");
  }
  if (!config.sync_reference) {
    // The TR-DPO keys do nothing without it; at their defaults (a resolved config.toml lists them) they are kept.
    const sdk::ConfigValues defaults = sdk::ConfigValues::defaults_of(binder().schema(), values.section());
    for (const char* key : {"sync_reference_steps", "sync_reference_alpha"}) {
      if (values.set_by_user(key) && values.entries().at(key).value != defaults.entries().at(key).value) {
        throw sdk::ConfigError(values.where(key) +
                               ": applies to TR-DPO, but module.sync_reference is false; set sync_reference = true "
                               "or remove " +
                               key);
      }
    }
    return;
  }
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

}  // namespace

DpoConfig read_dpo_config(const sdk::ConfigValues& values, int64_t max_length) {
  DpoConfig config = binder().read(values);
  check_losses(values, config.losses);
  config.loss_weights = resolve_loss_weights(values, config);
  if (config.has_loss(LossType::kRobust) && config.label_smoothing >= 0.5) {
    throw sdk::ConfigError(values.where("label_smoothing") + ": the robust loss divides by 1 − 2ε, so ε must be < 0.5");
  }
  check_reference_options(values, config);
  if (config.max_prompt_length == 0) config.max_prompt_length = max_length / 2;
  if (config.max_prompt_length > max_length - 2) {
    throw sdk::ConfigError(values.where("max_prompt_length") +
                           ": must leave room for <bos> and a completion token: <= " + std::to_string(max_length - 2) +
                           " (data.max_length − 2), got " + std::to_string(config.max_prompt_length));
  }
  return config;
}

}  // namespace ptrain::dpo
