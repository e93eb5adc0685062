// Supervised fine-tuning on completions: the pure functions of the plugin.
//
// A sequence is <bos> prompt completion <eos> (DESIGN.md §6). Position t
// predicts token t+1; only targets that are completion tokens or the final
// <eos> are trained on. The per-token loss is the negative log-likelihood
// l = -log p(target | prefix), aggregated by the configured mode.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace ptrain::sft {

struct TokenizedExample {
  std::vector<int64_t> tokens;   // <bos> prompt completion <eos>, cut to max_length
  int64_t completion_start = 0;  // index in `tokens` of the first completion token
  bool truncated = false;        // tokens were cut at max_length
};

TokenizedExample tokenize_example(const sdk::Tokenizer& tokenizer, std::string_view prompt,
                                  std::string_view completion, int64_t max_length);

// Inputs tokens[:-1], targets tokens[1:], loss mask on targets at index ≥
// completion_start; right-padded with `pad_id`.
sdk::TokenBatch collate_examples(const std::vector<TokenizedExample>& examples, int64_t pad_id);

}  // namespace ptrain::sft
