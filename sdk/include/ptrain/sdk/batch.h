// Examples as read from a dataset, token batches given to the model, and the
// plan by which the core cuts one rank's share of a global batch into
// microbatches (the cutting itself: ptrain/sdk/util/microbatching.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::sdk {

// One JSONL line. `index` is its 0-based position in the dataset, which the
// sampler uses; `location` is "file:line" for error messages.
struct Example {
  int64_t index = 0;
  std::string location;
  nlohmann::json fields;
};

// Token tensors for one forward pass of a causal LM.
//
// A packed row holds several documents back to back: document_ids says which
// one each position belongs to, attention stays inside a document (block-
// diagonal causal) and position_ids restart at 0 for each, so a packed
// forward equals the documents run one by one. Both are undefined for the
// usual one-sequence-per-row batch (positions 0..T-1, plain causal attention).
struct TokenBatch {
  TokenBatch() = default;
  // The usual unpacked batch: {input_ids, target_ids, loss_mask}.
  TokenBatch(at::Tensor input_ids, at::Tensor target_ids, at::Tensor loss_mask)
      : input_ids(std::move(input_ids)), target_ids(std::move(target_ids)), loss_mask(std::move(loss_mask)) {}

  at::Tensor input_ids;     // [B, T] int64, right-padded with the tokenizer's pad id
  at::Tensor target_ids;    // [B, T] int64, the token to predict after each position (pad where none)
  at::Tensor loss_mask;     // [B, T] bool, positions whose target is trained on
  at::Tensor position_ids;  // [B, T] int64 rotary positions, or undefined (0..T-1 in every row)
  at::Tensor document_ids;  // [B, T] int64: 0, 1, ... per document of the row, -1 on padding; or undefined
};

// The batch with every defined tensor on `device` (the same tensors when
// they are there already). A host batch bound for a GPU is copied once, before
// the microbatch loop, so the loss code never mixes host and device tensors.
TokenBatch batch_on_device(const TokenBatch& batch, at::Device device);

// `t` on `device`, or `t` itself when undefined or there already.
at::Tensor tensor_on_device(const at::Tensor& t, at::Device device);

// The whole global batch a prepare() or prepare_eval() call takes part in,
// the same on every rank (Context::global_batch()): what a loss whose terms
// depend on the whole batch needs — a KL reference point over the batch,
// batch-normalised advantages, leave-one-out baselines (docs/plugins.md,
// "Step-wide statistics").
struct GlobalBatch {
  bool held_out = false;  // a chunk of the [eval] held-out set, not an update step's batch
  // Every example of the batch, in batch order; on every rank the same.
  std::vector<const Example*> examples;
  // A stable id per example: its Example::index in the training set, or for
  // held-out examples (whose index is -1) their 0-based position among the
  // held-out examples.
  std::vector<int64_t> ids;
  // Where this rank's examples sit in `examples`, in the order prepare() gets them.
  std::vector<int64_t> rank_positions;
  // How many examples each rank gets, in rank order (they add up to examples.size()).
  std::vector<int64_t> rank_counts;
};

// What a plugin's prepare() returns: plugin-defined tensors and per-example
// fields in a subclass. The core reads only these counters (throughput metrics).
struct Microbatch {
  virtual ~Microbatch() = default;
  // Moves the subclass's tensors to `device` (Context::device()). The core
  // calls it once per microbatch after count_units() and before the first
  // microbatch_loss(), so prepare() may collate on the host and the loss code
  // finds everything beside the model's outputs. Tensors a plugin only reads
  // on the host (lists, counts) may stay.
  virtual void to_device(at::Device device) { (void)device; }
  int64_t num_examples = 0;
  int64_t num_tokens = 0;     // tokens that carry content (no padding)
  int64_t padded_tokens = 0;  // tokens the forward computes, padding included
};

// How one rank's examples are cut into microbatches: by count or by a padded
// token budget (exactly one of the two is positive). Any cut gives the same
// step gradient (docs/plugins.md, "Loss terms and aggregation modes"), so the
// plan only decides speed and memory.
struct MicrobatchPlan {
  int64_t micro_size = 0;    // examples per microbatch
  int64_t micro_tokens = 0;  // max (rows × longest row) per microbatch
  // Length-aware microbatching: examples of similar length share a
  // microbatch (longest first), so little of each forward is padding.
  bool group_by_length = false;
  // Packing (plugins that support it): examples are packed into rows of at
  // most row_tokens tokens by best-fit-decreasing, and rows are cut into
  // microbatches under micro_tokens. Needs micro_tokens.
  bool packing = false;
  int64_t row_tokens = 0;
};

}  // namespace ptrain::sdk
