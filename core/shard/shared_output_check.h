// Under distributed.sharding = "optimizer" or "full" every rank writes its
// part of each checkpoint (under "full" also of final/ and best/) into
// output_dir, and rank 0 moves those files into place: output_dir must be
// one directory that every rank can write and rank 0 can read (on several
// nodes, a shared filesystem). A node-local output_dir would fail only at
// the first checkpoint, after the run's first steps; this checks it at start.
#pragma once

#include "core/dist/communicator.h"

#include <filesystem>

namespace ptrain::shard {

// Collective. Each rank writes a probe file holding a token rank 0 chose
// into `output_dir` (created by rank 0 already); rank 0 reads them and
// every rank removes its own. Throws sdk::Error on every rank alike, naming
// the ranks that cannot write there and those whose file rank 0 does not see.
void check_output_dir_shared(dist::Communicator& communicator, const std::filesystem::path& output_dir);

}  // namespace ptrain::shard
