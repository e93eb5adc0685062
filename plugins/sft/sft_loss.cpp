#include "sft_loss.h"
#include "ptrain/sdk/util/microbatching.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>

namespace ptrain::sft {
namespace {

void truncate(TokenizedExample& example, int64_t max_length) {
  if (static_cast<int64_t>(example.tokens.size()) > max_length) {
    example.tokens.resize(max_length);
    example.trainable.resize(max_length);
    example.truncated = true;
  }
}

// Rows of inputs and targets right-padded with `pad_id`; the loss mask is
// `trained` per row, false on padding.
sdk::TokenBatch padded_rows(const std::vector<std::vector<int64_t>>& inputs,
                            const std::vector<std::vector<int64_t>>& targets,
                            const std::vector<std::vector<bool>>& trained, int64_t pad_id) {
  sdk::TokenBatch batch;
  batch.input_ids = sdk::pad_sequences(inputs, pad_id);
  batch.target_ids = sdk::pad_sequences(targets, pad_id);
  batch.loss_mask = at::zeros(batch.input_ids.sizes(), at::kBool);
  auto mask = batch.loss_mask.accessor<bool, 2>();
  for (size_t row = 0; row < trained.size(); ++row) {
    for (size_t j = 0; j < trained[row].size(); ++j) mask[row][j] = trained[row][j];
  }
  return batch;
}

}  // namespace

int64_t TokenizedExample::trainable_targets() const {
  return std::count_if(trainable.begin() + std::min<size_t>(1, trainable.size()), trainable.end(),
                       [](uint8_t flag) { return flag != 0; });
}

bool TokenizedExample::has_trainable_target() const { return trainable_targets() > 0; }

TokenizedExample tokenize_example(const sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view completion,
                                  int64_t max_length) {
  TokenizedExample example;
  const std::vector<int64_t> prompt_ids = tokenizer.encode(prompt);
  const std::vector<int64_t> completion_ids = tokenizer.encode(completion);
  example.tokens.reserve(prompt_ids.size() + completion_ids.size() + 2);
  if (tokenizer.bos_id() >= 0) example.tokens.push_back(tokenizer.bos_id());
  example.tokens.insert(example.tokens.end(), prompt_ids.begin(), prompt_ids.end());
  example.completion_start = static_cast<int64_t>(example.tokens.size());
  example.tokens.insert(example.tokens.end(), completion_ids.begin(), completion_ids.end());
  example.tokens.push_back(tokenizer.eos_id());
  example.trainable.assign(example.tokens.size(), 0);
  std::fill(example.trainable.begin() + example.completion_start, example.trainable.end(), 1);
  truncate(example, max_length);
  return example;
}

TokenizedExample tokenize_chat_example(const sdk::Tokenizer& tokenizer, const sdk::ChatTemplate& chat_template,
                                       const std::vector<sdk::ChatMessage>& messages, bool assistant_only_loss,
                                       int64_t max_length, const std::string& location) {
  sdk::ChatTokens chat = sdk::tokenize_chat(tokenizer, chat_template.render(messages, false, location));
  TokenizedExample example;
  example.tokens = std::move(chat.ids);
  if (assistant_only_loss) {
    example.trainable = std::move(chat.trainable);
  } else {
    example.trainable.assign(example.tokens.size(), 1);
  }
  truncate(example, max_length);
  return example;
}

sdk::TokenBatch collate_examples(const std::vector<TokenizedExample>& examples, int64_t pad_id) {
  std::vector<std::vector<int64_t>> inputs(examples.size()), targets(examples.size());
  std::vector<std::vector<bool>> trained(examples.size());
  for (size_t row = 0; row < examples.size(); ++row) {
    const auto& tokens = examples[row].tokens;
    if (tokens.size() < 2) {  // nothing to predict
      // Copied by range: g++ 14 warns falsely (-Warray-bounds) on copying a
      // vector it knows holds at most one element.
      inputs[row].assign(tokens.begin(), tokens.end());
      targets[row].assign(tokens.size(), pad_id);
      continue;
    }
    inputs[row].assign(tokens.begin(), tokens.end() - 1);
    targets[row].assign(tokens.begin() + 1, tokens.end());
    // Target index j is token j+1.
    for (size_t j = 1; j < tokens.size(); ++j) trained[row].push_back(examples[row].trainable[j] != 0);
  }
  return padded_rows(inputs, targets, trained, pad_id);
}

sdk::TokenBatch collate_packed_examples(const std::vector<std::vector<TokenizedExample>>& rows, int64_t pad_id) {
  std::vector<std::vector<int64_t>> inputs(rows.size()), targets(rows.size()), document_lengths(rows.size());
  std::vector<std::vector<bool>> trained(rows.size());
  for (size_t row = 0; row < rows.size(); ++row) {
    for (const TokenizedExample& example : rows[row]) {
      const auto& tokens = example.tokens;
      TORCH_CHECK(tokens.size() >= 2, "collate_packed_examples: an example of ", tokens.size(),
                  " tokens has nothing to predict");
      inputs[row].insert(inputs[row].end(), tokens.begin(), tokens.end() - 1);
      targets[row].insert(targets[row].end(), tokens.begin() + 1, tokens.end());
      for (size_t j = 1; j < tokens.size(); ++j) trained[row].push_back(example.trainable[j] != 0);
      document_lengths[row].push_back(static_cast<int64_t>(tokens.size()) - 1);
    }
  }
  sdk::TokenBatch batch = padded_rows(inputs, targets, trained, pad_id);
  std::tie(batch.document_ids, batch.position_ids) = sdk::packed_document_layout(document_lengths);
  return batch;
}

}  // namespace ptrain::sft
