#include "dpo_data.h"
#include "ptrain/sdk/util/microbatching.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <iterator>
#include <tuple>

namespace ptrain::dpo {
namespace {

struct Sequence {
  const std::vector<int64_t>* prompt;
  const std::vector<int64_t>* completion;
  const std::vector<uint8_t>* trained;  // empty: all
  int64_t shared_tokens;                // trained tokens counted as LD-DPO's shared part
};

// One side of a pair as a forward reads it: inputs tokens[:-1], targets
// tokens[1:], and per target whether it is trained and whether it is in
// LD-DPO's shared part.
struct SequenceTokens {
  std::vector<int64_t> inputs;
  std::vector<int64_t> targets;
  std::vector<uint8_t> trained;
  std::vector<uint8_t> shared;
};

SequenceTokens tokens_of(const Sequence& sequence) {
  TORCH_CHECK(!sequence.prompt->empty(), "a pair needs <bos> or a prompt token before its answers");
  std::vector<int64_t> tokens(*sequence.prompt);
  tokens.insert(tokens.end(), sequence.completion->begin(), sequence.completion->end());
  SequenceTokens out;
  out.inputs.assign(tokens.begin(), tokens.end() - 1);
  out.targets.assign(tokens.begin() + 1, tokens.end());
  out.trained.assign(out.inputs.size(), 0);
  out.shared.assign(out.inputs.size(), 0);
  // Target j is token j+1; the first completion token is token |prompt|.
  const auto first = static_cast<int64_t>(sequence.prompt->size()) - 1;
  const auto count = static_cast<int64_t>(sequence.completion->size());
  const std::vector<uint8_t>& trained = *sequence.trained;
  int64_t seen = 0;  // trained tokens before position k
  for (int64_t k = 0; k < count; ++k) {
    if (!trained.empty() && trained[k] == 0) continue;
    out.trained[first + k] = 1;
    out.shared[first + k] = seen++ < sequence.shared_tokens ? 1 : 0;
  }
  return out;
}

// Rows of sequences laid end to end, right-padded with pad_id: row r holds
// sequences[rows[r][0]], sequences[rows[r][1]], … When `packed`, the batch
// carries each document's positions and ids (block-diagonal attention) and
// `sequence_ids` names the sequence of every position (−1 on padding).
void collate_rows(const std::vector<SequenceTokens>& sequences, const std::vector<std::vector<int64_t>>& rows,
                  int64_t pad_id, bool packed, sdk::TokenBatch& batch, at::Tensor& shared_mask,
                  at::Tensor& sequence_ids) {
  std::vector<std::vector<int64_t>> inputs(rows.size());
  std::vector<std::vector<int64_t>> targets(rows.size());
  std::vector<std::vector<int64_t>> lengths(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const int64_t s : rows[r]) {
      const SequenceTokens& sequence = sequences.at(s);
      inputs[r].insert(inputs[r].end(), sequence.inputs.begin(), sequence.inputs.end());
      targets[r].insert(targets[r].end(), sequence.targets.begin(), sequence.targets.end());
      lengths[r].push_back(static_cast<int64_t>(sequence.inputs.size()));
    }
  }
  batch.input_ids = sdk::pad_sequences(inputs, pad_id);
  batch.target_ids = sdk::pad_sequences(targets, pad_id);
  batch.loss_mask = at::zeros(batch.input_ids.sizes(), at::kBool);
  shared_mask = at::zeros(batch.input_ids.sizes(), at::kBool);
  at::Tensor owners = at::full(batch.input_ids.sizes(), -1, at::kLong);
  auto mask = batch.loss_mask.accessor<bool, 2>();
  auto shared = shared_mask.accessor<bool, 2>();
  auto owner = owners.accessor<int64_t, 2>();
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t offset = 0;
    for (const int64_t s : rows[r]) {
      const SequenceTokens& sequence = sequences[s];
      for (size_t j = 0; j < sequence.inputs.size(); ++j) {
        mask[r][offset + j] = sequence.trained[j] != 0;
        shared[r][offset + j] = sequence.shared[j] != 0;
        owner[r][offset + j] = s;
      }
      offset += static_cast<int64_t>(sequence.inputs.size());
    }
  }
  if (packed) {
    std::tie(batch.document_ids, batch.position_ids) = sdk::packed_document_layout(lengths);
    sequence_ids = owners;
  }
}

// Each side of each pair as a sequence: chosen of pair i is sequence i,
// rejected sequence B + i.
std::vector<SequenceTokens> pair_sequences(const std::vector<TokenizedPair>& pairs, PairBatch& batch) {
  std::vector<int64_t> chosen_tokens;
  std::vector<int64_t> rejected_tokens;
  std::vector<SequenceTokens> chosen;
  std::vector<SequenceTokens> rejected;
  for (const TokenizedPair& pair : pairs) {
    chosen_tokens.push_back(trained_tokens(pair.chosen, pair.chosen_trained));
    rejected_tokens.push_back(trained_tokens(pair.rejected, pair.rejected_trained));
    const int64_t shared = std::min(chosen_tokens.back(), rejected_tokens.back());
    chosen.push_back(tokens_of({&pair.prompt, &pair.chosen, &pair.chosen_trained, shared}));
    rejected.push_back(tokens_of({&pair.prompt, &pair.rejected, &pair.rejected_trained, shared}));
  }
  batch.chosen_tokens = at::tensor(chosen_tokens, at::kLong);
  batch.rejected_tokens = at::tensor(rejected_tokens, at::kLong);
  std::move(rejected.begin(), rejected.end(), std::back_inserter(chosen));
  return chosen;
}

// Rows {first}, {first + 1}, …, {first + count − 1}: one sequence per row.
std::vector<std::vector<int64_t>> one_per_row(int64_t first, int64_t count) {
  std::vector<std::vector<int64_t>> rows;
  for (int64_t s = first; s < first + count; ++s) rows.push_back({s});
  return rows;
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

PairBatch pairs_on_device(const PairBatch& batch, at::Device device) {
  PairBatch moved = batch;
  for (sdk::TokenBatch& forward : moved.forwards) forward = sdk::batch_on_device(forward, device);
  for (at::Tensor& mask : moved.shared_masks) mask = sdk::tensor_on_device(mask, device);
  moved.chosen_tokens = sdk::tensor_on_device(moved.chosen_tokens, device);
  moved.rejected_tokens = sdk::tensor_on_device(moved.rejected_tokens, device);
  moved.sequence_ids = sdk::tensor_on_device(moved.sequence_ids, device);
  return moved;
}

PairBatch collate_pairs(const std::vector<TokenizedPair>& pairs, int64_t pad_id, bool concatenated) {
  const auto num_pairs = static_cast<int64_t>(pairs.size());
  PairBatch batch;
  const std::vector<SequenceTokens> sequences = pair_sequences(pairs, batch);
  at::Tensor unused;
  if (concatenated) {
    batch.forwards.resize(1);
    batch.shared_masks.resize(1);
    collate_rows(sequences, one_per_row(0, 2 * num_pairs), pad_id, false, batch.forwards[0], batch.shared_masks[0],
                 unused);
  } else {
    batch.forwards.resize(2);
    batch.shared_masks.resize(2);
    collate_rows(sequences, one_per_row(0, num_pairs), pad_id, false, batch.forwards[0], batch.shared_masks[0], unused);
    collate_rows(sequences, one_per_row(num_pairs, num_pairs), pad_id, false, batch.forwards[1], batch.shared_masks[1],
                 unused);
  }
  return batch;
}

PairBatch collate_packed_pairs(const std::vector<TokenizedPair>& pairs, const std::vector<std::vector<int64_t>>& rows,
                               int64_t pad_id) {
  const auto num_sequences = 2 * static_cast<int64_t>(pairs.size());
  PairBatch batch;
  const std::vector<SequenceTokens> sequences = pair_sequences(pairs, batch);
  std::vector<int64_t> placed(num_sequences, 0);
  for (const std::vector<int64_t>& row : rows) {
    for (const int64_t s : row) {
      TORCH_CHECK(s >= 0 && s < num_sequences && placed[s]++ == 0, "collate_packed_pairs: sequence ", s,
                  " is out of range [0, ", num_sequences, ") or placed twice");
    }
  }
  TORCH_CHECK(std::find(placed.begin(), placed.end(), 0) == placed.end(),
              "collate_packed_pairs: every sequence of every pair must be placed in a row");
  batch.forwards.resize(1);
  batch.shared_masks.resize(1);
  collate_rows(sequences, rows, pad_id, true, batch.forwards[0], batch.shared_masks[0], batch.sequence_ids);
  return batch;
}

int64_t sequence_input_length(const TokenizedPair& pair, bool rejected) {
  return static_cast<int64_t>(pair.prompt.size() + (rejected ? pair.rejected : pair.chosen).size()) - 1;
}

int64_t pair_packed_length(const TokenizedPair& pair) {
  return static_cast<int64_t>(2 * pair.prompt.size() + pair.chosen.size() + pair.rejected.size()) - 2;
}

}  // namespace ptrain::dpo
