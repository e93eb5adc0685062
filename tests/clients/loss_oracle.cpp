// ptrain's side of the TRL checks (tests/clients/oracles/trl_dpo.py,
// trl_grpo.py, trl_kto.py): the DPO, GRPO and KTO plugins' own loss code on
// log-probs a test gives, so that TRL's trainers can be run on the very same
// numbers.
//
//   ptrain_loss_oracle < request.json > response.json
//
// The request names the algorithm, its [module] keys as a user would write
// them (read by the plugin's own config reader, defaults and checks
// included) and the batch:
//   dpo   {"algorithm": "dpo", "module": {...}, "pairs": [{
//            "prompt_length": int, "chosen_ids": [n_c], "rejected_ids": [n_r],
//            "policy_chosen": [n_c], "policy_rejected": [n_r],          log π of each completion token
//            "reference_chosen": [n_c], "reference_rejected": [n_r],    log π_ref of each
//            "chosen_logits": [n_c][V], "rejected_logits": [n_r][V]}]}  the policy's logits; WPO only
//         → {"losses": [B] (the pair losses' weighted sum), "sft_loss": the sft term per chosen token,
//            "rewards_chosen": [B], "rewards_rejected": [B], "wpo_weights": [B] (WPO only)}
//         The pairs are collated as the plugin collates them (dpo_data.h), so
//         the LD-DPO split and the token counts are the plugin's own.
//   grpo  {"algorithm": "grpo", "module": {...}, "log_probs": [B][T], "old_log_probs": [B][T],
//          "ref_log_probs": [B][T], "advantages": [B], "mask": [B][T] (0/1)}
//         → {"loss": L}, L = S / n of the loss_type's aggregation (one microbatch, one rank)
//   kto   {"algorithm": "kto", "module": {...}, "examples": [{"desirable": bool,
//            "policy": [n], "reference": [n],             log π, log π_ref of each completion token
//            "kl_policy": [m], "kl_reference": [m]}]}      the same of the example's KL pair
//         → {"losses": [B] (weighted), "z0": the KL reference point of the batch, "rewards": [B],
//            "logps": [B] (the policy's completion log-probs)}
//   kto_partners  {"algorithm": "kto_partners", "prompt_lengths": [B], "max_length": L}
//         → {"scorable": [B], "partners": [B]}: which examples keep a completion token, and whose
//           completion each one's KL pair takes (-1: none)
// Every number is float64 and JSON keeps it exact both ways.
#include "dpo_config.h"
#include "dpo_data.h"
#include "dpo_loss.h"
#include "grpo_config.h"
#include "grpo_loss.h"
#include "kto_config.h"
#include "kto_data.h"
#include "kto_loss.h"
#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/util/aggregation.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using namespace ptrain;

// max_length of the DPO config and of the pairs: nothing is truncated.
constexpr int64_t kNoTruncation = int64_t{1} << 30;

// A JSON value of the request's "module" object as the config layer holds it.
sdk::ConfigValue config_value(const std::string& key, const json& value) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array() && !value.empty() && value.front().is_string()) return value.get<std::vector<std::string>>();
  if (value.is_array()) return value.get<std::vector<double>>();
  throw std::runtime_error("module." + key + ": unsupported value " + value.dump());
}

// The schema's defaults, then the request's keys as if a user set them.
sdk::ConfigValues module_values(const sdk::ConfigSchema& schema, const json& module) {
  sdk::ConfigValues values = sdk::ConfigValues::defaults_of(schema, "module");
  for (const auto& [key, value] : module.items()) {
    if (schema.find(key) == nullptr) throw std::runtime_error("module." + key + ": not a key of the plugin");
    values.set(key, config_value(key, value), "request.json", true);
  }
  return values;
}

at::Tensor doubles(const json& values) { return at::tensor(values.get<std::vector<double>>(), at::kDouble); }

at::Tensor matrix(const json& rows) {
  std::vector<at::Tensor> stacked;
  for (const json& row : rows) stacked.push_back(doubles(row));
  return at::stack(stacked);
}

std::vector<double> to_vector(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.detach().to(at::kDouble).contiguous().reshape({-1});
  return {flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()};
}

// Values given per completion token, laid out where the collated batch trains:
// row r's trained positions, in order, take sequence r's values. [R, T, ...]
at::Tensor at_trained_positions(const at::Tensor& loss_mask, const std::vector<at::Tensor>& per_sequence) {
  std::vector<int64_t> shape = loss_mask.sizes().vec();
  for (int64_t d = 1; d < per_sequence.front().dim(); ++d) shape.push_back(per_sequence.front().size(d));
  at::Tensor out = at::zeros(shape, at::kDouble);
  for (int64_t r = 0; r < loss_mask.size(0); ++r) {
    const at::Tensor positions = loss_mask[r].nonzero().squeeze(1);
    TORCH_CHECK(positions.size(0) == per_sequence[r].size(0), "sequence ", r, " trains ", positions.size(0),
                " tokens, the request gives ", per_sequence[r].size(0), " values");
    out[r].index_put_({positions}, per_sequence[r]);
  }
  return out;
}

// Chosen sides of every pair, then rejected sides: the rows of a concatenated forward.
std::vector<at::Tensor> both_sides(const json& pairs, const std::string& chosen, const std::string& rejected,
                                   bool is_matrix) {
  std::vector<at::Tensor> sides;
  for (const std::string& key : {chosen, rejected}) {
    for (const json& pair : pairs) sides.push_back(is_matrix ? matrix(pair.at(key)) : doubles(pair.at(key)));
  }
  return sides;
}

std::vector<int64_t> ids(const json& values) { return values.get<std::vector<int64_t>>(); }

// The request's pairs, collated as the plugin collates them: one concatenated
// forward, chosen rows then rejected rows (dpo_data.h).
dpo::PairBatch collate_request_pairs(const json& pairs_json) {
  std::vector<dpo::TokenizedPair> pairs;
  for (const json& pair : pairs_json) {
    const std::vector<int64_t> prompt(pair.at("prompt_length").get<int64_t>(), 1);
    pairs.push_back(dpo::fit_pair(prompt, /*bos_id=*/-1, {ids(pair.at("chosen_ids")), {}},
                                  {ids(pair.at("rejected_ids")), {}}, kNoTruncation, /*max_prompt_length=*/0));
  }
  return dpo::collate_pairs(pairs, /*pad_id=*/0, /*concatenated=*/true);
}

// A model's sequence log-probs of every side, as the plugin sums them
// (dpo_scoring.cpp), from the request's per-token values. [2B] each.
dpo::SequenceLogProbParts scored_sides(const json& pairs_json, const dpo::PairBatch& batch, const std::string& chosen,
                                       const std::string& rejected) {
  const at::Tensor& loss_mask = batch.forwards.at(0).loss_mask;
  const at::Tensor tokens = at_trained_positions(loss_mask, both_sides(pairs_json, chosen, rejected, false));
  return dpo::sequence_log_prob_parts(tokens, loss_mask, batch.shared_masks.at(0));
}

// What the pair losses read, combined at ld_alpha for the policy and the
// reference alike (dpo_module.cpp).
dpo::PairLogProbs pair_log_probs(const dpo::SequenceLogProbParts& policy_parts,
                                 const dpo::SequenceLogProbParts& reference_parts, const dpo::PairBatch& batch,
                                 const dpo::DpoConfig& config) {
  const int64_t num_pairs = batch.chosen_tokens.size(0);
  const at::Tensor policy = dpo::combine_parts(policy_parts, config.ld_alpha);
  const at::Tensor reference =
      config.reference_free ? at::zeros_like(policy) : dpo::combine_parts(reference_parts, config.ld_alpha);
  dpo::PairLogProbs logps;
  logps.policy_chosen = policy.narrow(0, 0, num_pairs);
  logps.policy_rejected = policy.narrow(0, num_pairs, num_pairs);
  logps.reference_chosen = reference.narrow(0, 0, num_pairs);
  logps.reference_rejected = reference.narrow(0, num_pairs, num_pairs);
  logps.chosen_tokens = batch.chosen_tokens.to(at::kDouble);
  logps.rejected_tokens = batch.rejected_tokens.to(at::kDouble);
  return logps;
}

// WPO's weight of each pair from the request's logits. [B]
at::Tensor wpo_weights(const json& pairs_json, const dpo::PairBatch& batch) {
  const sdk::TokenBatch& forward = batch.forwards.at(0);
  const int64_t num_pairs = batch.chosen_tokens.size(0);
  const at::Tensor logits =
      at_trained_positions(forward.loss_mask, both_sides(pairs_json, "chosen_logits", "rejected_logits", true));
  const at::Tensor means = dpo::wpo_adjusted_log_prob_means(logits, forward.target_ids, forward.loss_mask);
  return dpo::wpo_pair_weights(means.narrow(0, 0, num_pairs), means.narrow(0, num_pairs, num_pairs));
}

json dpo_response(const json& request) {
  sdk::ConfigSchema schema;
  dpo::declare_dpo_config(schema);
  const dpo::DpoConfig config = dpo::read_dpo_config(module_values(schema, request.at("module")), kNoTruncation);
  const json& pairs_json = request.at("pairs");
  const dpo::PairBatch batch = collate_request_pairs(pairs_json);
  const int64_t num_pairs = batch.chosen_tokens.size(0);
  const dpo::SequenceLogProbParts policy = scored_sides(pairs_json, batch, "policy_chosen", "policy_rejected");
  const dpo::PairLogProbs logps =
      pair_log_probs(policy, scored_sides(pairs_json, batch, "reference_chosen", "reference_rejected"), batch, config);

  // Σ_j λ_j ℓ_j per pair over the pair losses, and the sft term per chosen
  // token (its own units), as dpo_module.cpp weighs them.
  const dpo::LossParams params = dpo::loss_params(config, /*bco_delta=*/0.0);
  at::Tensor losses = at::zeros({num_pairs}, at::kDouble);
  double sft_loss = 0.0;
  for (size_t j = 0; j < config.losses.size(); ++j) {
    if (config.losses[j] != dpo::LossType::kSft) {
      losses = losses + config.loss_weights[j] * dpo::pair_loss(config.losses[j], logps, params);
      continue;
    }
    const at::Tensor chosen_sums = (policy.shared + policy.rest).narrow(0, 0, num_pairs);
    sft_loss = config.loss_weights[j] * -chosen_sums.sum().item<double>() / logps.chosen_tokens.sum().item<double>();
  }
  json response{{"sft_loss", sft_loss}};
  if (config.use_weighting) {
    const at::Tensor weights = wpo_weights(pairs_json, batch);
    losses = losses * weights;
    response["wpo_weights"] = to_vector(weights);
  }
  // Rewards in the form of the first pair loss, as the plugin reports them.
  const auto first_pair_loss = std::find_if(config.losses.begin(), config.losses.end(),
                                            [](dpo::LossType type) { return type != dpo::LossType::kSft; });
  const dpo::PairRewards rewards = dpo::pair_rewards(
      first_pair_loss == config.losses.end() ? dpo::LossType::kSigmoid : *first_pair_loss, logps, config.beta);
  response["losses"] = to_vector(losses);
  response["rewards_chosen"] = to_vector(rewards.chosen);
  response["rewards_rejected"] = to_vector(rewards.rejected);
  return response;
}

json grpo_response(const json& request) {
  sdk::ConfigSchema schema;
  grpo::declare_grpo_config(schema);
  const grpo::GrpoConfig config = grpo::read_grpo_config(module_values(schema, request.at("module")));
  const at::Tensor mask = matrix(request.at("mask")).to(at::kBool);
  grpo::TokenLossInputs inputs;
  inputs.mask = mask;
  inputs.log_probs = matrix(request.at("log_probs")) * mask;  // 0 outside the mask, as the plugin gives them
  inputs.old_log_probs = matrix(request.at("old_log_probs")) * mask;
  if (config.beta > 0.0) inputs.ref_log_probs = matrix(request.at("ref_log_probs")) * mask;
  inputs.advantages = doubles(request.at("advantages"));
  const grpo::TokenLoss token_loss = grpo::grpo_token_loss(inputs, config);
  const at::Tensor loss_sum = sdk::aggregate_loss_sum(token_loss.loss, mask, config.aggregation);
  const int64_t units = sdk::count_loss_units(mask, config.aggregation);
  return {{"loss", loss_sum.item<double>() / static_cast<double>(units)}};
}

// Σ of per-token values, as the plugin sums a completion's log-probs (float64).
double sequence_sum(const json& values) { return doubles(values).sum().item<double>(); }

json kto_response(const json& request) {
  sdk::ConfigSchema schema;
  kto::declare_kto_config(schema);
  const kto::KtoConfig config = kto::read_kto_config(module_values(schema, request.at("module")));
  std::vector<double> policy;
  std::vector<double> reference;
  std::vector<double> kl_ratios;  // of each example's KL pair
  std::vector<uint8_t> desirable;
  for (const json& example : request.at("examples")) {
    policy.push_back(sequence_sum(example.at("policy")));
    reference.push_back(sequence_sum(example.at("reference")));
    kl_ratios.push_back(sequence_sum(example.at("kl_policy")) - sequence_sum(example.at("kl_reference")));
    desirable.push_back(example.at("desirable").get<bool>() ? 1 : 0);
  }
  // As kto_module.cpp: apo_zero_unpaired reads no z0 (0, and no KL pairs scored).
  const at::Tensor z0 = config.uses_reference_point() ? kto::reference_point(at::tensor(kl_ratios, at::kDouble))
                                                      : at::zeros({}, at::kDouble);
  const at::Tensor policy_logps = at::tensor(policy, at::kDouble);
  const kto::KtoLosses losses = kto::kto_losses(policy_logps, at::tensor(reference, at::kDouble),
                                                at::tensor(desirable, at::kByte).to(at::kBool), z0, config);
  return {{"losses", to_vector(losses.losses)},
          {"z0", z0.item<double>()},
          {"rewards", to_vector(losses.rewards)},
          {"logps", policy}};
}

json kto_partners_response(const json& request) {
  const int64_t max_length = request.at("max_length").get<int64_t>();
  std::vector<bool> scorable;
  for (const int64_t length : request.at("prompt_lengths").get<std::vector<int64_t>>()) {
    kto::KtoExample example;
    example.prompt.assign(static_cast<size_t>(length), 1);
    scorable.push_back(example.scorable(max_length));
  }
  return {{"scorable", scorable}, {"partners", kto::kl_partners(scorable)}};
}

}  // namespace

int main() {
  try {
    const json request = json::parse(std::cin);
    const std::string algorithm = request.at("algorithm").get<std::string>();
    json response;
    if (algorithm == "dpo") {
      response = dpo_response(request);
    } else if (algorithm == "grpo") {
      response = grpo_response(request);
    } else if (algorithm == "kto") {
      response = kto_response(request);
    } else if (algorithm == "kto_partners") {
      response = kto_partners_response(request);
    } else {
      throw std::runtime_error("algorithm '" + algorithm + "': expected dpo, grpo, kto or kto_partners");
    }
    std::cout << response.dump() << "\n";
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ptrain_loss_oracle: %s\n", error.what());
    return 1;
  }
  return 0;
}
