// The run's model directories: final/ at the end of the run and best/ after
// an evaluation that improved checkpoint.best_metric are written by the same
// function, so both hold the same files (weights in checkpoint.save_dtype,
// config.json, ...).
#pragma once

#include "core/checkpoint/model_dir.h"
#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/model/causal_lm.h"
#include "core/shard/sharded_layers.h"

#include <filesystem>

namespace ptrain::train {

// Writes `policy` to `target` as a complete model directory with `files`
// (output_model_files.h), atomically (an existing `target` is replaced only
// once the new one is complete). With LoRA, `target` is the PEFT adapter
// directory, plus merged/ (a complete model) when lora.save_merged is set.
void export_model(const config::RunConfig& config, const model::CausalLm& policy,
                  const checkpoint::ModelDirFiles& files, const std::filesystem::path& target);

// Collective, sharding "full": the same directory, its weights written by
// every rank at once, one gathered layer at a time (rank_weight_writer.h);
// rank 0 writes the rest and moves them into place. Every rank returns once
// `target` is complete.
void export_sharded_model(const config::RunConfig& config, const model::CausalLm& policy, shard::ShardedLayers& layers,
                          dist::Communicator& communicator, const checkpoint::ModelDirFiles& files,
                          const std::filesystem::path& target);

}  // namespace ptrain::train
