// Writes model directories so that a crash mid-write never leaves a partial
// one where a complete one is expected (DESIGN.md §7).
#pragma once

#include "core/model/causal_lm.h"

#include <cstdint>
#include <filesystem>

namespace ptrain::checkpoint {

// Writes the model (config.json + model.safetensors) into a temporary sibling
// directory, fsyncs it, then renames it to `target`. An existing `target` is
// replaced only after the new one is complete.
void save_model_atomically(const model::CausalLm& model, const std::filesystem::path& target);

// Removes the oldest checkpoints/step_N directories beyond the newest `keep_last`.
void prune_checkpoints(const std::filesystem::path& checkpoints_dir, int64_t keep_last);

}  // namespace ptrain::checkpoint
