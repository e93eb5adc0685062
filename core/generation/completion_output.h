// `ptrain generate`'s output: text for a person, or JSONL for a program
// (docs/generation.md#output).
#pragma once

#include "core/generation/completions.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/tokenizer.h"

#include <ostream>
#include <vector>

namespace ptrain::generation {

// Each prompt once, then its completions indented, with why each stopped
// and its length in tokens.
void write_completions_text(std::ostream& out, const std::vector<Completion>& completions,
                            const sdk::Tokenizer& tokenizer);

// One JSON object a line: prompt, completion (text), prompt_index,
// generation, source (the prompt's file:line), prompt_ids, completion_ids,
// logprobs (with_logprobs), stop_reason ("eos", "stop_string", "length"),
// completion_tokens. Bytes that are not UTF-8 become U+FFFD.
void write_completions_jsonl(std::ostream& out, const std::vector<Completion>& completions,
                             const std::vector<sdk::Example>& prompts, const sdk::Tokenizer& tokenizer,
                             bool with_logprobs);

}  // namespace ptrain::generation
