#include "core/train/shared_staging_dir.h"

#include "core/checkpoint/remove_tree.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

namespace ptrain::train {
namespace fs = std::filesystem;

SharedStagingDir::SharedStagingDir(fs::path path, dist::Communicator& communicator)
    : path_(std::move(path)), owner_(communicator.rank() == 0) {
  std::error_code error;
  if (owner_) {
    checkpoint::remove_tree(path_, error);
    if (!error) fs::create_directories(path_, error);
  }
  // Every rank learns whether it exists, so none waits for a peer that gave up.
  std::vector<at::Tensor> failed{at::scalar_tensor(error ? 1.0 : 0.0, at::kDouble)};
  communicator.all_reduce_max(failed);
  if (failed[0].item<double>() > 0.0) {
    throw sdk::Error(path_.string() + ": rank 0 cannot create it" + (error ? ": " + error.message() : std::string()));
  }
}

SharedStagingDir::~SharedStagingDir() {
  if (!owner_) return;
  std::error_code ignored;  // a leftover directory is harmless: the next save clears it
  checkpoint::remove_tree(path_, ignored);
}

}  // namespace ptrain::train
