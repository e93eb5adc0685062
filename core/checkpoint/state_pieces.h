// Sharded optimizer state on disk (distributed.sharding = "optimizer"): each
// rank writes the state of the elements it owns to its own file,
// optimizer_shard_<r>_of_<R>.safetensors, as 1-D pieces named
// "<tensor>@<offset>" (elements offset.. of the flattened tensor) beside
// whole tensors (AdamW's "<parameter>.step", which several ranks may write
// with the same value). Reading joins the pieces of all files back into whole
// flattened tensors, so a checkpoint resumes under any world size and
// sharding mode.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

std::string piece_name(const std::string& tensor, int64_t offset);

// "optimizer_shard_<rank>_of_<world_size>.safetensors"
std::string optimizer_shard_file(int rank, int world_size);
bool is_optimizer_shard_file(const std::string& file_name);

// Pieces of every part joined into whole 1-D tensors (each must be covered
// exactly once), whole tensors taken as they are. Throws sdk::Error naming
// `source` and the tensor whose pieces overlap or leave a gap.
NamedTensors join_pieces(const std::vector<NamedTensors>& parts, const std::string& source);

}  // namespace ptrain::checkpoint
