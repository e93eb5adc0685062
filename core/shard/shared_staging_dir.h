// A directory every rank writes its own files into (its weight files, its
// optimizer shard), on a filesystem the ranks share, before rank 0 moves
// them into the checkpoint or model directory being written atomically. It
// lies beside that target, so the moves are renames.
#pragma once

#include "core/dist/communicator.h"

#include <filesystem>

namespace ptrain::shard {

class SharedStagingDir {
 public:
  // Collective: rank 0 creates `path` empty (removing what an interrupted
  // save left there); every rank returns once it exists.
  SharedStagingDir(std::filesystem::path path, dist::Communicator& communicator);
  // Rank 0 removes whatever is still there (all of it when the save failed).
  ~SharedStagingDir();
  SharedStagingDir(const SharedStagingDir&) = delete;
  SharedStagingDir& operator=(const SharedStagingDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool owner_;
};

}  // namespace ptrain::shard
