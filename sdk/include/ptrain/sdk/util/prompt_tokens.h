// A prompt as a policy reads it before its completion: what GRPO's rollouts
// and the core's generation and evaluation (`ptrain generate`, `ptrain eval`)
// give the rollout engine, so that both see the same tokens.
#pragma once

#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::sdk {

// The tokenizer's chat template's rendering of the example's "messages" with
// the generation prompt, or <bos> (when the tokenizer has one) and the
// "prompt" text; left-truncated (as TRL) to max_length − 1 tokens, leaving
// room for one completion token. `text` receives the text reward functions
// see. Throws sdk::DataError naming the example for an empty prompt, chat
// data without a chat template, or neither field.
std::vector<int64_t> prompt_token_ids(const Tokenizer& tokenizer, const Example& example, int64_t max_length,
                                      std::string& text);

}  // namespace ptrain::sdk
