#include "kto_data.h"

#include "ptrain/sdk/errors.h"
#include "ptrain/sdk/util/example_fields.h"
#include "ptrain/sdk/util/microbatching.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace ptrain::kto {

void check_kto_example(const sdk::Example& example) {
  // A DPO file is the likeliest wrong input: say what KTO wants instead.
  if (!sdk::has_field(example, "completion") && sdk::has_field(example, "chosen") &&
      sdk::has_field(example, "rejected")) {
    throw sdk::DataError(example.location +
                         ": a preference pair ('chosen' and 'rejected'); KTO wants one completion per example: "
                         "'prompt', 'completion' and 'label' (true for a desirable completion, false for an "
                         "undesirable one). Split each pair into two examples, or train pairs with DPO");
  }
  sdk::require_string(example, "prompt");
  sdk::require_string(example, "completion");
  sdk::require_bool(example, "label");
}

KtoExample tokenize_kto_example(const sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view completion,
                                bool desirable) {
  KtoExample example;
  if (tokenizer.bos_id() >= 0) example.prompt.push_back(tokenizer.bos_id());
  const std::vector<int64_t> prompt_ids = tokenizer.encode(prompt);
  example.prompt.insert(example.prompt.end(), prompt_ids.begin(), prompt_ids.end());
  example.completion = tokenizer.encode(completion);
  example.completion.push_back(tokenizer.eos_id());
  example.desirable = desirable;
  return example;
}

KtoExample tokenize_kto_example(const sdk::Tokenizer& tokenizer, const sdk::Example& example) {
  return tokenize_kto_example(tokenizer, sdk::require_string(example, "prompt"),
                              sdk::require_string(example, "completion"), sdk::require_bool(example, "label"));
}

int64_t input_length(const PromptCompletion& sequence, int64_t max_length) {
  const auto length = static_cast<int64_t>(sequence.prompt->size() + sequence.completion->size());
  return std::min(length, max_length) - 1;
}

sdk::TokenBatch collate_sequences(const std::vector<PromptCompletion>& sequences, int64_t max_length, int64_t pad_id) {
  std::vector<std::vector<int64_t>> inputs;
  std::vector<std::vector<int64_t>> targets;
  std::vector<int64_t> prompt_lengths;
  for (const PromptCompletion& sequence : sequences) {
    std::vector<int64_t> tokens = *sequence.prompt;
    tokens.insert(tokens.end(), sequence.completion->begin(), sequence.completion->end());
    tokens.resize(static_cast<size_t>(std::min<int64_t>(max_length, static_cast<int64_t>(tokens.size()))));
    TORCH_CHECK(static_cast<int64_t>(sequence.prompt->size()) < static_cast<int64_t>(tokens.size()),
                "kto: a sequence of ", tokens.size(), " tokens keeps no completion token");
    inputs.emplace_back(tokens.begin(), tokens.end() - 1);
    targets.emplace_back(tokens.begin() + 1, tokens.end());
    prompt_lengths.push_back(static_cast<int64_t>(sequence.prompt->size()));
  }
  sdk::TokenBatch batch;
  batch.input_ids = sdk::pad_sequences(inputs, pad_id);
  batch.target_ids = sdk::pad_sequences(targets, pad_id);
  // Target j is token j + 1: a completion token from j + 1 = prompt length on, up to the row's end.
  const at::Tensor positions = at::arange(batch.input_ids.size(1), at::kLong).unsqueeze(0);
  const at::Tensor first = at::tensor(prompt_lengths, at::kLong).unsqueeze(1) - 1;
  std::vector<int64_t> row_lengths;
  for (const std::vector<int64_t>& row : inputs) row_lengths.push_back(static_cast<int64_t>(row.size()));
  const at::Tensor end = at::tensor(row_lengths, at::kLong).unsqueeze(1);
  batch.loss_mask = positions.ge(first).logical_and(positions.lt(end));
  return batch;
}

}  // namespace ptrain::kto
