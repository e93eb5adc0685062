#include "core/checkpoint/state_pieces.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <map>

namespace ptrain::checkpoint {

std::string piece_name(const std::string& tensor, int64_t offset) { return tensor + "@" + std::to_string(offset); }

std::string optimizer_shard_file(int rank, int world_size) {
  return "optimizer_shard_" + std::to_string(rank) + "_of_" + std::to_string(world_size) + ".safetensors";
}

bool is_optimizer_shard_file(const std::string& file_name) { return file_name.rfind("optimizer_shard_", 0) == 0; }

NamedTensors join_pieces(const std::vector<NamedTensors>& parts, const std::string& source) {
  struct Piece {
    int64_t offset;
    at::Tensor values;
  };
  std::map<std::string, std::vector<Piece>> pieces;  // by whole tensor name, in name order
  std::map<std::string, at::Tensor> whole;
  for (const NamedTensors& part : parts) {
    for (const auto& [name, tensor] : part) {
      const size_t at_sign = name.rfind('@');
      if (at_sign == std::string::npos) {
        whole.emplace(name, tensor);
        continue;
      }
      const int64_t offset = std::stoll(name.substr(at_sign + 1));
      pieces[name.substr(0, at_sign)].push_back({offset, tensor.reshape({-1})});
    }
  }
  NamedTensors joined(whole.begin(), whole.end());
  for (auto& [name, list] : pieces) {
    int64_t numel = 0;
    for (const Piece& piece : list) numel = std::max(numel, piece.offset + piece.values.numel());
    at::Tensor flat = at::zeros({numel}, list.front().values.options());
    at::Tensor covered = at::zeros({numel}, at::kInt);
    for (const Piece& piece : list) {
      flat.narrow(0, piece.offset, piece.values.numel()).copy_(piece.values);
      covered.narrow(0, piece.offset, piece.values.numel()).add_(1);
    }
    if (!covered.eq(1).all().item<bool>()) {
      throw sdk::Error(source + ": the optimizer shards of '" + name + "' overlap or leave a gap");
    }
    joined.emplace_back(name, flat);
  }
  return joined;
}

}  // namespace ptrain::checkpoint
