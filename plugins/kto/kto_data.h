// KTO's data: unpaired completions, each marked desirable or not.
//
//   {"prompt": "2+2=", "completion": "4", "label": true}
//   {"prompt": "2+2=", "completion": "5", "label": false}
//
// (TRL's unpaired preference format.) A sequence is <bos> prompt completion
// <eos> (no <bos> when the tokenizer has none), cut at data.max_length from
// the end as TRL's collator cuts it; position t predicts token t+1 and the
// completion's tokens (its <eos> included) are the ones scored. An example
// whose prompt alone fills max_length keeps no completion token: it has
// nothing to score and takes no part in the loss or the KL pairs (TRL drops
// it from the dataset).
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace ptrain::kto {

struct KtoExample {
  std::vector<int64_t> prompt;      // <bos> and the prompt's ids
  std::vector<int64_t> completion;  // the completion's ids and <eos>
  bool desirable = false;

  // Whether prompt + completion keeps a completion token within max_length.
  bool scorable(int64_t max_length) const { return static_cast<int64_t>(prompt.size()) < max_length; }
  bool truncated(int64_t max_length) const {
    return static_cast<int64_t>(prompt.size() + completion.size()) > max_length;
  }
};

// Throws DataError "file:line: ..." when a field is missing or mistyped.
void check_kto_example(const sdk::Example& example);

KtoExample tokenize_kto_example(const sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view completion,
                                bool desirable);
// The same of a dataset line (check_kto_example's fields).
KtoExample tokenize_kto_example(const sdk::Tokenizer& tokenizer, const sdk::Example& example);

// One scored sequence: a prompt followed by a completion, maybe another
// example's (a KL pair).
struct PromptCompletion {
  const std::vector<int64_t>* prompt = nullptr;
  const std::vector<int64_t>* completion = nullptr;
};

// Tokens of the sequence within max_length, less the last (what the forward reads).
int64_t input_length(const PromptCompletion& sequence, int64_t max_length);

// The sequences, each cut to max_length, as one right-padded batch: inputs
// tokens[:-1], targets tokens[1:], the loss mask on targets that are
// completion tokens. Every sequence must keep a completion token.
sdk::TokenBatch collate_sequences(const std::vector<PromptCompletion>& sequences, int64_t max_length, int64_t pad_id);

}  // namespace ptrain::kto
