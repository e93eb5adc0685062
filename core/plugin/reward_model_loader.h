// Loads reward models (sdk/reward_model.h) for Context::load_reward_model: a
// sequence classifier (core/model/sequence_classifier.h) and the tokenizer of
// its directory, with the chat template that tokenizer_config.json gives.
#pragma once

#include "core/model/causal_lm.h"
#include "ptrain/sdk/reward_model.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <memory>
#include <string>

namespace ptrain::plugin {

// Weights on `device` in their stored dtype, widened there, matrix products
// at `compute_dtype` (as a reference model); `on_decoder`, when given, runs
// on the model's decoder once loaded (sharding "full" shards its layers).
// Throws sdk::ModelError for the model files, sdk::ConfigError for the
// tokenizer files, each naming the file.
std::unique_ptr<sdk::RewardModel> load_reward_model(const std::string& model_dir, at::Device device,
                                                    at::ScalarType compute_dtype,
                                                    const std::function<void(model::CausalLm&)>& on_decoder = {});

}  // namespace ptrain::plugin
