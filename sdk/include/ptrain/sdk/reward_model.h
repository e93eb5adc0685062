// Reward models: Hugging Face sequence-classification models (a `score`
// head read at the last non-pad token, e.g. LlamaForSequenceClassification)
// that give a completion one scalar score. The core loads them
// (Context::load_reward_model) with their own tokenizer and chat template,
// onto the run's device, frozen; a plugin turns prompts and completions
// into token ids with that tokenizer and asks for scores. GRPO's
// reward_models option is built on it (docs/grpo.md).
#pragma once

#include "ptrain/sdk/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::sdk {

class RewardModel {
 public:
  virtual ~RewardModel() = default;
  // The directory it was loaded from, as given.
  virtual std::string directory() const = 0;
  // Its own tokenizer (the directory's tokenizer.json), whose
  // chat_template() is the directory's own (tokenizer_config.json's): never
  // nullptr, since a reward model reads conversations.
  virtual const Tokenizer& tokenizer() const = 0;
  // One score per sequence of its tokenizer's ids (unpadded, each
  // non-empty, ids below the model's vocabulary), in order, computed in one
  // batch on the run's device without gradients. The caller chooses the batch.
  virtual std::vector<double> score(const std::vector<std::vector<int64_t>>& sequences) = 0;
};

}  // namespace ptrain::sdk
