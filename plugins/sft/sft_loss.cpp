#include "sft_loss.h"

#include <ATen/ATen.h>

namespace ptrain::sft {

TokenizedExample tokenize_example(const sdk::Tokenizer& tokenizer, std::string_view prompt,
                                  std::string_view completion, int64_t max_length) {
  TokenizedExample example;
  const std::vector<int64_t> prompt_ids = tokenizer.encode(prompt);
  const std::vector<int64_t> completion_ids = tokenizer.encode(completion);
  example.tokens.reserve(prompt_ids.size() + completion_ids.size() + 2);
  example.tokens.push_back(tokenizer.bos_id());
  example.tokens.insert(example.tokens.end(), prompt_ids.begin(), prompt_ids.end());
  example.completion_start = static_cast<int64_t>(example.tokens.size());
  example.tokens.insert(example.tokens.end(), completion_ids.begin(), completion_ids.end());
  example.tokens.push_back(tokenizer.eos_id());
  if (static_cast<int64_t>(example.tokens.size()) > max_length) {
    example.tokens.resize(max_length);
    example.truncated = true;
  }
  return example;
}

sdk::TokenBatch collate_examples(const std::vector<TokenizedExample>& examples, int64_t pad_id) {
  std::vector<std::vector<int64_t>> inputs;
  std::vector<std::vector<int64_t>> targets;
  inputs.reserve(examples.size());
  targets.reserve(examples.size());
  for (const TokenizedExample& example : examples) {
    const auto& tokens = example.tokens;
    if (tokens.size() < 2) {  // nothing to predict
      inputs.push_back(tokens);
      targets.emplace_back(tokens.size(), pad_id);
      continue;
    }
    inputs.emplace_back(tokens.begin(), tokens.end() - 1);
    targets.emplace_back(tokens.begin() + 1, tokens.end());
  }
  sdk::TokenBatch batch;
  batch.input_ids = sdk::pad_sequences(inputs, pad_id);
  batch.target_ids = sdk::pad_sequences(targets, pad_id);
  batch.loss_mask = at::zeros(batch.input_ids.sizes(), at::kBool);
  auto mask = batch.loss_mask.accessor<bool, 2>();
  for (size_t row = 0; row < examples.size(); ++row) {
    // Target index j is token j+1, trained iff it is a completion token or <eos>.
    const auto num_targets = static_cast<int64_t>(targets[row].size());
    const int64_t first_trained = std::max<int64_t>(0, examples[row].completion_start - 1);
    if (examples[row].tokens.size() < 2) continue;
    for (int64_t j = first_trained; j < num_targets; ++j) mask[row][j] = true;
  }
  return batch;
}

}  // namespace ptrain::sft
