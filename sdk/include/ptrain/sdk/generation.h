// Rollouts: batched sampling from the policy, offered by the core to plugins
// (GRPO) through Context::rollout_engine().
//
// Each sequence draws its randomness from a generator of its own, seeded by
// (seed, step, prompt_index, generation_index), so a completion does not
// depend on which rank, batch or microbatch produced it: the same request
// gives the same tokens whatever else is generated with it. A later turn of a
// multi-turn episode (RolloutRequest::turn) adds the turn to the seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::sdk {

// Logit processing in the order transformers applies it: repetition penalty,
// temperature, top-k, top-p, min-p; then one draw from what is left.
struct SamplingParams {
  double temperature = 1.0;         // 0: greedy (argmax, no draw)
  int64_t top_k = 0;                // keep the k most likely tokens; 0: off
  double top_p = 1.0;               // keep the smallest set with probability ≥ top_p; 1: off
  double min_p = 0.0;               // drop tokens with p < min_p · p_max; 0: off
  double repetition_penalty = 1.0;  // CTRL: logit / θ if > 0 else logit · θ, for tokens of prompt + completion; 1: off
  int64_t max_new_tokens = 64;
  std::vector<std::string> stop_strings;  // generation stops once the completion's text contains one (kept)
  bool stop_at_eos = true;                // <eos> ends a completion (and is part of it)
  uint64_t seed = 0;                      // with the step, the prompt and generation indices: each sequence's seed
  int64_t step = 0;
  bool use_kv_cache = true;  // false: recompute the whole prefix every token (for benchmarks and tests)
};

struct RolloutRequest {
  std::vector<int64_t> prompt_ids;  // the prompt as the model reads it (<bos> included if any); non-empty
  int64_t prompt_index = 0;         // global index of the prompt (e.g. Example::index)
  int64_t generation_index = 0;     // which of the prompt's completions (0 .. G−1)
  int64_t max_new_tokens = -1;      // ≥ 0: a tighter limit for this request than SamplingParams::max_new_tokens
  int64_t turn = 0;                 // which assistant turn of a multi-turn episode (its prompt: the episode so far)
};

enum class StopReason { kEos, kStopString, kLength };

struct Rollout {
  std::vector<int64_t> completion_ids;  // generated tokens, the final <eos> included when it ended the completion
  StopReason stop_reason = StopReason::kLength;
  bool truncated() const { return stop_reason == StopReason::kLength; }
};

class RolloutEngine {
 public:
  virtual ~RolloutEngine() = default;
  // Completions of every request with the current policy weights, without
  // gradients, at most `max_batch` sequences decoded together (0: all).
  // Throws sdk::UsageError for an empty prompt or a prompt with no room left
  // under the model's max_position_embeddings.
  virtual std::vector<Rollout> generate(const std::vector<RolloutRequest>& requests, const SamplingParams& params,
                                        int64_t max_batch = 0) = 0;
};

// The 64-bit seed of one sequence's generator: std::seed_seq over the four values.
uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t prompt_index, int64_t generation_index);
// Turn t > 0 of a multi-turn episode: std::seed_seq over the five values
// (turn 0 is the four-value seed above, so single-turn rollouts keep theirs).
uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t prompt_index, int64_t generation_index, int64_t turn);

}  // namespace ptrain::sdk
