// Before anything else collective in a run, the ranks check that they are
// about to run the same thing: a rank that resumes another checkpoint (or
// none: a node-local output_dir without the checkpoint), reads another
// config, other data or another plugin would otherwise train on for the
// whole run on mismatched state (docs/distributed.md). One collective
// gathers a fingerprint per aspect from every rank; only when they differ
// do the ranks exchange the texts that let every rank name who differs in what.
#pragma once

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/plugin/plugin_loader.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::train {

// One thing every rank must have alike, as this rank sees it.
struct RunAspect {
  std::string name;  // "config", "resume", "data.train", ...
  std::string text;  // what this rank has, readable, its content's fingerprint included
};

// This rank's aspects, in an order every rank builds alike: the world size,
// the plugin (name, version, the library's SHA-256), the resume point (the
// checkpoint's step, run id and manifest fingerprint, or a fresh start), the
// contents of data.train, eval.data and tokenizer.path, and the resolved
// config (`resolved_config_toml`) but output_dir, which may be per node.
std::vector<RunAspect> run_aspects(const config::RunConfig& config, const plugin::LoadedPlugin& plugin,
                                   const std::string& resolved_config_toml,
                                   const std::optional<std::filesystem::path>& resume_checkpoint,
                                   int world_size);

// Collective. Throws sdk::ConfigError on every rank alike when some rank's
// aspects differ from rank 0's, naming the ranks and, for each, what differs
// (config keys with both values).
void check_ranks_agree(dist::Communicator& communicator, const std::vector<RunAspect>& aspects);

}  // namespace ptrain::train
