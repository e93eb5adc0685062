#include "dpo_data.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace ptrain::dpo {
namespace {

struct Sequence {
  const std::vector<int64_t>* prompt;
  const std::vector<int64_t>* completion;
  const std::vector<uint8_t>* trained;  // empty: all
  int64_t shared_tokens;                // trained tokens counted as LD-DPO's shared part
};

// Rows of inputs tokens[:-1], targets tokens[1:], trained on the completion targets.
void collate_rows(const std::vector<Sequence>& rows, int64_t pad_id, sdk::TokenBatch& batch, at::Tensor& shared_mask) {
  for (const Sequence& row : rows) {
    TORCH_CHECK(!row.prompt->empty(), "a pair needs <bos> or a prompt token before its answers");
  }
  std::vector<std::vector<int64_t>> inputs;
  std::vector<std::vector<int64_t>> targets;
  for (const Sequence& row : rows) {
    std::vector<int64_t> tokens(*row.prompt);
    tokens.insert(tokens.end(), row.completion->begin(), row.completion->end());
    inputs.emplace_back(tokens.begin(), tokens.end() - 1);
    targets.emplace_back(tokens.begin() + 1, tokens.end());
  }
  batch.input_ids = sdk::pad_sequences(inputs, pad_id);
  batch.target_ids = sdk::pad_sequences(targets, pad_id);
  batch.loss_mask = at::zeros(batch.input_ids.sizes(), at::kBool);
  shared_mask = at::zeros(batch.input_ids.sizes(), at::kBool);
  auto mask = batch.loss_mask.accessor<bool, 2>();
  auto shared = shared_mask.accessor<bool, 2>();
  for (size_t r = 0; r < rows.size(); ++r) {
    // Target j is token j+1; the first completion token is token |prompt|.
    const auto first = static_cast<int64_t>(rows[r].prompt->size()) - 1;
    const auto count = static_cast<int64_t>(rows[r].completion->size());
    const std::vector<uint8_t>& trained = *rows[r].trained;
    int64_t seen = 0;  // trained tokens before position k
    for (int64_t k = 0; k < count; ++k) {
      if (!trained.empty() && trained[k] == 0) continue;
      mask[r][first + k] = true;
      shared[r][first + k] = seen++ < rows[r].shared_tokens;
    }
  }
}

}  // namespace

TokenizedPair fit_pair(const std::vector<int64_t>& prompt, int64_t bos_id, Completion chosen, Completion rejected,
                       int64_t max_length, int64_t max_prompt_length) {
  TORCH_CHECK(max_prompt_length >= 0 && max_prompt_length <= max_length - 2, "max_prompt_length ", max_prompt_length,
              " must be in [0, max_length − 2 = ", max_length - 2, "]");
  TokenizedPair pair;
  pair.chosen = std::move(chosen.ids);
  pair.chosen_trained = std::move(chosen.trained);
  pair.rejected = std::move(rejected.ids);
  pair.rejected_trained = std::move(rejected.trained);

  const int64_t bos_count = bos_id >= 0 ? 1 : 0;
  const auto prompt_length = static_cast<int64_t>(prompt.size());
  const auto longest = static_cast<int64_t>(std::max(pair.chosen.size(), pair.rejected.size()));
  int64_t kept_prompt = prompt_length;
  if (bos_count + prompt_length + longest > max_length) {
    pair.truncated = true;
    kept_prompt = std::min(prompt_length, std::max(max_prompt_length, max_length - bos_count - longest));
    const int64_t completion_budget = max_length - bos_count - kept_prompt;
    for (auto [ids, trained] :
         {std::pair{&pair.chosen, &pair.chosen_trained}, std::pair{&pair.rejected, &pair.rejected_trained}}) {
      if (static_cast<int64_t>(ids->size()) > completion_budget) ids->resize(completion_budget);
      if (static_cast<int64_t>(trained->size()) > completion_budget) trained->resize(completion_budget);
    }
  }
  pair.prompt.reserve(bos_count + kept_prompt);
  if (bos_count > 0) pair.prompt.push_back(bos_id);
  pair.prompt.insert(pair.prompt.end(), prompt.end() - kept_prompt, prompt.end());
  return pair;
}

TokenizedPair tokenize_pair(const sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view chosen,
                            std::string_view rejected, int64_t max_length, int64_t max_prompt_length) {
  Completion chosen_ids{tokenizer.encode(chosen), {}};
  chosen_ids.ids.push_back(tokenizer.eos_id());
  Completion rejected_ids{tokenizer.encode(rejected), {}};
  rejected_ids.ids.push_back(tokenizer.eos_id());
  // Tokenizers without <bos> (Qwen) start sequences at the prompt.
  return fit_pair(tokenizer.encode(prompt), tokenizer.bos_id(), std::move(chosen_ids), std::move(rejected_ids),
                  max_length, max_prompt_length);
}

int64_t trained_tokens(const std::vector<int64_t>& completion, const std::vector<uint8_t>& trained) {
  if (trained.empty()) return static_cast<int64_t>(completion.size());
  return std::count(trained.begin(), trained.end(), uint8_t{1});
}

int64_t pair_input_length(const TokenizedPair& pair) {
  return static_cast<int64_t>(pair.prompt.size() + std::max(pair.chosen.size(), pair.rejected.size())) - 1;
}

PairBatch collate_pairs(const std::vector<TokenizedPair>& pairs, int64_t pad_id, bool concatenated) {
  const auto num_pairs = static_cast<int64_t>(pairs.size());
  std::vector<Sequence> chosen_rows;
  std::vector<Sequence> rejected_rows;
  std::vector<int64_t> chosen_tokens;
  std::vector<int64_t> rejected_tokens;
  for (int64_t i = 0; i < num_pairs; ++i) {
    const TokenizedPair& pair = pairs[i];
    chosen_tokens.push_back(trained_tokens(pair.chosen, pair.chosen_trained));
    rejected_tokens.push_back(trained_tokens(pair.rejected, pair.rejected_trained));
    const int64_t shared = std::min(chosen_tokens.back(), rejected_tokens.back());
    chosen_rows.push_back({&pair.prompt, &pair.chosen, &pair.chosen_trained, shared});
    rejected_rows.push_back({&pair.prompt, &pair.rejected, &pair.rejected_trained, shared});
  }
  PairBatch batch;
  batch.chosen_tokens = at::tensor(chosen_tokens, at::kLong);
  batch.rejected_tokens = at::tensor(rejected_tokens, at::kLong);
  if (concatenated) {
    std::vector<Sequence> rows(chosen_rows);
    rows.insert(rows.end(), rejected_rows.begin(), rejected_rows.end());
    batch.forwards.resize(1);
    batch.shared_masks.resize(1);
    collate_rows(rows, pad_id, batch.forwards[0], batch.shared_masks[0]);
  } else {
    batch.forwards.resize(2);
    batch.shared_masks.resize(2);
    collate_rows(chosen_rows, pad_id, batch.forwards[0], batch.shared_masks[0]);
    collate_rows(rejected_rows, pad_id, batch.forwards[1], batch.shared_masks[1]);
  }
  return batch;
}

}  // namespace ptrain::dpo
