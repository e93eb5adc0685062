#include "core/shard/shared_output_check.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <fstream>
#include <random>
#include <string>

namespace ptrain::shard {
namespace fs = std::filesystem;

namespace {

fs::path probe_path(const fs::path& output_dir, int rank) {
  return output_dir / (".ptrain-shared-probe.rank" + std::to_string(rank));
}

std::string probe_text(int64_t token, int rank) {
  return "ptrain rank " + std::to_string(rank) + " token " + std::to_string(token) + "\n";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The ranks whose entry in the reduced `flags` is set, "1, 3".
std::string flagged_ranks(const at::Tensor& flags) {
  std::string ranks;
  for (int64_t rank = 0; rank < flags.numel(); ++rank) {
    if (flags[rank].item<double>() > 0.0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  }
  return ranks;
}

}  // namespace

void check_output_dir_shared(dist::Communicator& communicator, const fs::path& output_dir) {
  const int rank = communicator.rank();
  const int world_size = communicator.world_size();
  // A token fresh for this run, so that an old probe in a node-local copy proves nothing.
  std::vector<at::Tensor> token{at::scalar_tensor(static_cast<int64_t>(std::random_device()() >> 1), at::kLong)};
  communicator.broadcast(token, 0);
  const int64_t run_token = token[0].item<int64_t>();

  // Flags per rank: it cannot write its probe; rank 0 does not see it.
  at::Tensor cannot_write = at::zeros({world_size}, at::kDouble);
  std::error_code error;
  fs::create_directories(output_dir, error);
  std::ofstream(probe_path(output_dir, rank)) << probe_text(run_token, rank);
  if (read_text(probe_path(output_dir, rank)) != probe_text(run_token, rank)) cannot_write[rank] = 1.0;
  std::vector<at::Tensor> written{cannot_write};
  communicator.all_reduce_max(written);

  at::Tensor unseen = at::zeros({world_size}, at::kDouble);
  if (rank == 0) {
    for (int other = 1; other < world_size; ++other) {
      const bool seen = read_text(probe_path(output_dir, other)) == probe_text(run_token, other);
      if (!seen && written[0][other].item<double>() == 0.0) unseen[other] = 1.0;
    }
  }
  std::vector<at::Tensor> seen{unseen};
  communicator.broadcast(seen, 0);
  fs::remove(probe_path(output_dir, rank), error);

  const std::string unwritable = flagged_ranks(written[0]);
  const std::string unshared = flagged_ranks(seen[0]);
  if (unwritable.empty() && unshared.empty()) return;
  std::string problem;
  if (!unwritable.empty()) problem = "rank(s) " + unwritable + " cannot write there";
  if (!unshared.empty()) {
    problem += (problem.empty() ? "" : "; ") + std::string("rank 0 does not see the files rank(s) ") + unshared +
               " wrote there (a node-local directory?)";
  }
  throw sdk::Error("output_dir '" + output_dir.string() + "': " + problem +
                   ". Under distributed.sharding = \"optimizer\" or \"full\" every rank writes its part of each "
                   "checkpoint into output_dir for rank 0 to move into place, so it must be one directory all "
                   "ranks share (on several nodes, a shared filesystem)");
}

}  // namespace ptrain::shard
