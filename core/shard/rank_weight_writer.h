// Sharding "full": a model's weights written by all ranks at once, each its
// own files, into one directory the ranks share, in the layout transformers
// writes (model/sharded_weights.h), so no rank ever holds more of the model
// than its chunks, the replicated tensors and one gathered decoder layer.
//
// The tensors fall into groups (a decoder layer, or one replicated tensor
// such as the embeddings); in model order each group goes whole to the rank
// that has the fewest bytes so far, and each rank's tensors fill its files,
// model-<k>-of-<N>.safetensors, up to max_shard_bytes apiece (ranks' files in
// rank order). Every rank computes the same plan from the shapes alone; rank
// 0 also writes model.safetensors.index.json.
#pragma once

#include "core/dist/communicator.h"
#include "core/model/causal_lm.h"
#include "core/shard/sharded_layers.h"

#include <cstdint>
#include <filesystem>

namespace ptrain::shard {

// Collective. Writes `model`'s weights (sharded by `layers`) in `dtype` into
// `dir`. Throws sdk::Error on every rank alike: before writing anything when
// a weight holds NaN or Inf (naming the tensor and `target`, the directory
// being saved), or after the writes when any rank could not write.
void write_weights_by_rank(const model::CausalLm& model, ShardedLayers& layers, dist::Communicator& communicator,
                           const std::filesystem::path& dir, at::ScalarType dtype, int64_t max_shard_bytes,
                           const std::filesystem::path& target);

}  // namespace ptrain::shard
