// Examples as read from a dataset, token batches given to the model, and the
// microbatch split of one rank's share of a global batch.
#pragma once

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ptrain::sdk {

// One JSONL line. `index` is its 0-based position in the dataset, which the
// sampler uses; `location` is "file:line" for error messages.
struct Example {
  int64_t index = 0;
  std::string location;
  nlohmann::json fields;
};

// Field access that fails with "file:line: field 'name': expected ..., got ...".
const std::string& require_string(const Example& example, const char* field);
bool has_field(const Example& example, const char* field);

// Token tensors for one forward pass of a causal LM.
struct TokenBatch {
  at::Tensor input_ids;   // [B, T] int64, right-padded with the tokenizer's pad id
  at::Tensor target_ids;  // [B, T] int64, the token to predict after each position (pad where none)
  at::Tensor loss_mask;   // [B, T] bool, positions whose target is trained on
};

// What a plugin's prepare() returns: plugin-defined tensors and per-example
// fields in a subclass. The core reads only these counters (throughput metrics).
struct Microbatch {
  virtual ~Microbatch() = default;
  int64_t num_examples = 0;
  int64_t num_tokens = 0;     // tokens that carry content (no padding)
  int64_t padded_tokens = 0;  // tokens the forward computes, padding included
};

// How one rank's examples are cut into microbatches: by count or by a padded
// token budget (exactly one of the two is positive).
struct MicrobatchPlan {
  int64_t micro_size = 0;    // examples per microbatch
  int64_t micro_tokens = 0;  // max (examples × longest length) per microbatch
};

// Splits examples with the given lengths (in tokens), kept in order, into
// microbatches following the plan. Returns the example positions of each
// microbatch; the last may be smaller. Under a token budget an example longer
// than the budget gets a microbatch of its own.
std::vector<std::vector<int64_t>> split_into_microbatches(const std::vector<int64_t>& lengths,
                                                          const MicrobatchPlan& plan);

// Right-pads token sequences into a [B, T] int64 tensor (T = longest).
at::Tensor pad_sequences(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id);

}  // namespace ptrain::sdk
