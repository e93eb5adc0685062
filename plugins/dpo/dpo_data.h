// Preference pairs as token sequences: tokenization with the truncation rule,
// and collation of a microbatch's pairs into forward batches.
//
// A pair is two sequences sharing a prompt, <bos> prompt chosen <eos> and
// <bos> prompt rejected <eos> (DESIGN.md §6). Position t predicts token t+1;
// only completion tokens and the final <eos> are trained on.
//
// Truncation (max_length L, max_prompt_length Lp, longest completion c incl.
// <eos>, b = 1 with <bos>, 0 for tokenizers or chat templates without one): when
// b + |prompt| + c > L, the prompt keeps its last
// k = min(|prompt|, max(Lp, L − b − c)) tokens, then each completion keeps its
// first L − b − k tokens (losing <eos> if cut). Both sides always keep at
// least one trained token.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace ptrain::dpo {

struct TokenizedPair {
  std::vector<int64_t> prompt;    // <bos> (if the tokenizer has one) and the kept prompt tokens
  std::vector<int64_t> chosen;    // kept completion tokens, <eos> included if it fit
  std::vector<int64_t> rejected;  // same for the rejected answer
  // Chat pairs: 1 where a completion token is trained (assistant content and
  // its end-of-turn marker; 0 for a user turn inside a multi-turn answer).
  // Empty: every completion token is trained.
  std::vector<uint8_t> chosen_trained;
  std::vector<uint8_t> rejected_trained;
  bool truncated = false;  // something was cut
};

// A completion as token ids, with its trained mask (empty: all trained).
struct Completion {
  std::vector<int64_t> ids;
  std::vector<uint8_t> trained;
};

// The truncation rule above over already tokenized parts; `prompt` excludes
// <bos>, which comes first when bos_id >= 0.
TokenizedPair fit_pair(const std::vector<int64_t>& prompt, int64_t bos_id, Completion chosen, Completion rejected,
                       int64_t max_length, int64_t max_prompt_length);

TokenizedPair tokenize_pair(const sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view chosen,
                            std::string_view rejected, int64_t max_length, int64_t max_prompt_length);

// Trained tokens of one side of a pair.
int64_t trained_tokens(const std::vector<int64_t>& completion, const std::vector<uint8_t>& trained);

// Forward batches of one microbatch of B pairs.
struct PairBatch {
  // Concatenated: one batch of 2B rows (chosen rows 0..B−1, rejected rows
  // B..2B−1). Separate: two batches, chosen then rejected, B rows each.
  std::vector<sdk::TokenBatch> forwards;
  // Per forward, [rows, T] bool: the first min(|chosen|, |rejected|)
  // trained completion tokens of their pair (LD-DPO's shared part).
  std::vector<at::Tensor> shared_masks;
  at::Tensor chosen_tokens;    // [B] int64, trained tokens of each chosen completion
  at::Tensor rejected_tokens;  // [B] int64
  // Packed (one forward): [R, T] int64, the sequence each position belongs
  // to, chosen of pair i = i, rejected = B + i, −1 on padding. Undefined when
  // each row is one sequence, in the orders above.
  at::Tensor sequence_ids;
};

PairBatch collate_pairs(const std::vector<TokenizedPair>& pairs, int64_t pad_id, bool concatenated);

// The batch with every tensor on `device`; collation happens on the host.
PairBatch pairs_on_device(const PairBatch& batch, at::Device device);

// Packing: one forward whose row r holds the sequences rows[r] (chosen of
// pair i = i, rejected = B + i) end to end, each a document of its own
// (block-diagonal attention, positions restarting). Every sequence appears once.
PairBatch collate_packed_pairs(const std::vector<TokenizedPair>& pairs, const std::vector<std::vector<int64_t>>& rows,
                               int64_t pad_id);

// Input tokens of one side of a pair: its length in a packed row.
int64_t sequence_input_length(const TokenizedPair& pair, bool rejected);

// Input tokens of both sides of a pair together.
int64_t pair_packed_length(const TokenizedPair& pair);

// Input length (tokens the forward computes) of the longer side of a pair.
int64_t pair_input_length(const TokenizedPair& pair);

}  // namespace ptrain::dpo
