#include "core/shard/shared_staging_dir.h"

#include "core/checkpoint/owned_removal.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

namespace ptrain::shard {
namespace fs = std::filesystem;

SharedStagingDir::SharedStagingDir(fs::path path, dist::Communicator& communicator)
    : path_(std::move(path)), owner_(communicator.rank() == 0) {
  std::string failure;
  if (owner_) {
    failure = checkpoint::try_remove_owned(path_);
    std::error_code error;
    if (failure.empty()) fs::create_directories(path_, error);
    if (error) failure = error.message();
  }
  // Every rank learns whether it exists, so none waits for a peer that gave up.
  std::vector<at::Tensor> failed{at::scalar_tensor(failure.empty() ? 0.0 : 1.0, at::kDouble)};
  communicator.all_reduce_max(failed);
  if (failed[0].item<double>() > 0.0) {
    throw sdk::Error(path_.string() + ": rank 0 cannot create it" + (failure.empty() ? "" : ": " + failure));
  }
}

SharedStagingDir::~SharedStagingDir() {
  if (!owner_) return;
  checkpoint::try_remove_owned(path_);  // a leftover directory is harmless: the next save clears it
}

}  // namespace ptrain::shard
