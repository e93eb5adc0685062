// Completions of a list of prompts, split over the ranks and gathered whole
// on every rank: what `ptrain generate` writes and `ptrain eval` scores.
//
// Prompt i goes to rank i mod R and its k-th completion draws from the
// generator of (seed, 0, i, k) (sdk::rollout_seed), so a completion does not
// depend on the world size, the batch it was decoded in or the other prompts.
// The gather sums tensors in which every slot is written by exactly one
// rank (zeros elsewhere): exact whatever R.
#pragma once

#include "core/dist/communicator.h"
#include "core/model/causal_lm.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/generation.h"
#include "ptrain/sdk/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::generation {

struct GenerationSettings {
  sdk::SamplingParams sampling;  // its seed fixes every draw; its step stays 0
  int64_t per_prompt = 1;        // completions per prompt (n)
  int64_t max_batch = 0;         // sequences decoded together on a rank; 0: all of a round
  bool with_logprobs = false;    // also each completion token's log-probability
  bool show_progress = true;     // a progress bar and a closing line (rank 0)
};

struct Completion {
  int64_t prompt = 0;      // position in the prompt list
  int64_t generation = 0;  // 0 .. per_prompt − 1
  std::vector<int64_t> prompt_ids;
  std::string prompt_text;  // as reward functions see it (sdk::prompt_token_ids)
  std::vector<int64_t> completion_ids;
  // with_logprobs: log p(token | everything before it) of each completion
  // token under the model itself (temperature 1, no top-k/top-p), the
  // figure vLLM's logprobs report by default.
  std::vector<double> logprobs;
  sdk::StopReason stop_reason = sdk::StopReason::kLength;
};

// Every prompt's completions, ordered by (prompt, generation), on every
// rank. `prompts` hold "prompt" or "messages" (sdk::prompt_token_ids, cut to
// the model's max_position_embeddings); every rank passes the same list.
// Throws sdk::DataError naming a prompt that cannot be read, before any is generated.
std::vector<Completion> generate_completions(model::CausalLm& model, const sdk::Tokenizer& tokenizer,
                                             const std::vector<sdk::Example>& prompts,
                                             const GenerationSettings& settings, dist::Communicator& communicator);

// The prompts of held-out examples: each as it is, except a chat whose last
// message is the assistant's (an SFT example), which becomes the messages
// before it, with that message's content as "answer" unless the example has
// an "answer" field. Throws sdk::DataError naming a malformed "messages".
std::vector<sdk::Example> held_out_prompts(const std::vector<sdk::Example>& examples);

// Throws sdk::DataError naming the first prompt sdk::prompt_token_ids
// cannot read (no "prompt" or "messages", chat data without a template, ...).
void check_prompts(const sdk::Tokenizer& tokenizer, const std::vector<sdk::Example>& prompts, int64_t max_length);

// "eos", "stop_string" or "length".
const char* stop_reason_name(sdk::StopReason reason);

}  // namespace ptrain::generation
