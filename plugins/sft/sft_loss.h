// Supervised fine-tuning: the pure functions of the plugin.
//
// Prompt/completion data is <bos> prompt completion <eos> (docs/file-formats.md#the-byte-tokenizer);
// chat data is the conversation rendered by the run's chat template. Position
// t predicts token t+1; a target is trained on when its token is trainable:
// completion tokens and the final <eos>, or — for chat with
// assistant_only_loss — each assistant turn's content and end-of-turn token
// (every token after the first without it). The per-token loss is the
// negative log-likelihood l = -log p(target | prefix), aggregated by the
// configured mode; only the mask depends on the data format.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/tokenizer.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace ptrain::sft {

struct TokenizedExample {
  std::vector<int64_t> tokens;     // the sequence, cut to max_length
  std::vector<uint8_t> trainable;  // per token: 1 if it is trained on as a target (same length as tokens)
  int64_t completion_start = 0;    // prompt/completion: index in `tokens` of the first completion token
  bool truncated = false;          // tokens were cut at max_length

  // Targets (tokens[1:]) trained on; an example without one is skipped.
  int64_t trainable_targets() const;
  bool has_trainable_target() const;
};

// <bos> prompt completion <eos>; no <bos> when the tokenizer has none (Qwen).
TokenizedExample tokenize_example(const sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view completion,
                                  int64_t max_length);

// A conversation rendered with `chat_template`; `location` names the example in errors.
TokenizedExample tokenize_chat_example(const sdk::Tokenizer& tokenizer, const sdk::ChatTemplate& chat_template,
                                       const std::vector<sdk::ChatMessage>& messages, bool assistant_only_loss,
                                       int64_t max_length, const std::string& location);

// Inputs tokens[:-1], targets tokens[1:], loss mask on targets whose token is
// trainable; right-padded with `pad_id`.
sdk::TokenBatch collate_examples(const std::vector<TokenizedExample>& examples, int64_t pad_id);

// Packed rows: each row holds its examples' inputs back to back, with
// document_ids and restarting position_ids (sdk::TokenBatch), so no position
// attends or predicts across a document boundary: a document's last input
// predicts its own last token. Every example has at least 2 tokens.
sdk::TokenBatch collate_packed_examples(const std::vector<std::vector<TokenizedExample>>& rows, int64_t pad_id);

}  // namespace ptrain::sft
