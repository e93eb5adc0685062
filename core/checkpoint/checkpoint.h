// Checkpoints: everything a run needs to continue as if it had not stopped.
//
//   checkpoints/step_N/   config.json, model.safetensors   the policy: a complete Hugging Face model dir
//                         (or its shards), generation_config.json, tokenizer files (model_dir.h);
//                         with LoRA, adapter_config.json and adapter_model.safetensors instead of
//                         config.json and the weights (the base model is model.init's)
//                         optimizer.safetensors            per-parameter optimizer state, or
//                         optimizer_shard_<r>_of_<R>...    each rank's part of it (state_pieces.h)
//                         plugin_state.json/.safetensors   the plugin's own state
//                         trainer_state.json               step, counters, run id, world size
//                         config.toml                      the resolved config it ran with
//                         manifest.json                    size and CRC-32 of every file, written last
//   checkpoints/latest    the name of the newest complete checkpoint, replaced atomically
//
// The data order needs no saved state: global batches depend only on (seed,
// epoch, step) (docs/architecture.md#the-update-step), which is also why a checkpoint resumes on any
// world size or microbatch setting. The core draws no other random numbers.
#pragma once

#include "core/checkpoint/model_dir.h"
#include "core/model/causal_lm.h"
#include "core/model/lora_adapter_dir.h"
#include "ptrain/sdk/train_module.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct TrainerState {
  int64_t completed_steps = 0;
  int64_t skipped_steps = 0;
  int world_size = 1;
  std::string plugin;
  std::string run_id;
  // The state of the core's components that decide the run's course, as of
  // completed_steps, each as its component writes and reads it: the numeric
  // guard's counters (train/numeric_guard.h) and best/'s record with the
  // early-stopping count (train/best_model.h). Null in checkpoints that
  // predate them.
  nlohmann::json numeric_guard;
  nlohmann::json best_model;
  std::string source;  // the file from_json read, for errors in those records ("" when not read)

  nlohmann::json to_json() const;
  static TrainerState from_json(const nlohmann::json& json, const std::string& source);
};

struct CheckpointData {
  const model::CausalLm* model = nullptr;
  NamedTensors optimizer_state;
  sdk::PluginState plugin_state;
  TrainerState trainer;
  std::string config_toml;
  const ModelDirFiles* model_files = nullptr;  // what the model directory holds besides weights; null: nothing
  // optimizer_state is this rank's pieces (state_pieces.h): the ranks write
  // them to rank_files_dir, and write_checkpoint does not.
  bool optimizer_state_sharded = false;
  // Set: files the ranks wrote (optimizer shards; the weights, where
  // weights_in_rank_files) on a filesystem they share, moved into the checkpoint.
  std::filesystem::path rank_files_dir;
  bool weights_in_rank_files = false;
};

struct LoadedCheckpoint {
  std::filesystem::path dir;
  std::unique_ptr<model::CausalLm> model;     // null for a LoRA checkpoint
  std::optional<model::LoraAdapter> adapter;  // a LoRA checkpoint's adapters
  NamedTensors optimizer_state;  // from shards: joined, each tensor flattened
  sdk::PluginState plugin_state;
  TrainerState trainer;
  std::string config_toml;
};

// Writes checkpoints_dir/step_N atomically, then points `latest` at it, then
// prunes all but the newest `keep_last`. Returns the checkpoint directory.
std::filesystem::path write_checkpoint(const std::filesystem::path& checkpoints_dir, const CheckpointData& data,
                                       int64_t keep_last);

// Verifies the manifest (every file present, with its size and CRC-32) and
// reads everything. Throws sdk::Error naming the file that is missing,
// truncated, corrupt or from another run.
LoadedCheckpoint read_checkpoint(const std::filesystem::path& dir);

// `--resume auto`: the checkpoint `latest` names under output_dir, or nullopt
// when there is none; otherwise the given checkpoint directory, or the one
// `latest` names when given a checkpoints/ or run directory.
std::optional<std::filesystem::path> find_resume_checkpoint(const std::string& resume,
                                                            const std::filesystem::path& output_dir);

// A model directory (e.g. final/) written atomically, its weights in `dtype`,
// with `files` (model_dir.h). `merged`, when given (a LoRA model's merged
// copy), goes to target/merged/ in the same atomic write. `weights_from`:
// the weight files, already written (write_model_dir).
void save_model_atomically(const model::CausalLm& model, const std::filesystem::path& target,
                           at::ScalarType dtype = at::kFloat, const ModelDirFiles& files = {},
                           const model::CausalLm* merged = nullptr, const std::filesystem::path& weights_from = {});

// True for a checkpoint ptrain wrote: a directory (not a link) named
// step_N holding a manifest.json of this format.
bool is_ptrain_checkpoint(const std::filesystem::path& dir);

// Removes the oldest checkpoints (is_ptrain_checkpoint) beyond the newest
// `keep_last`; anything else in checkpoints_dir stays.
void prune_checkpoints(const std::filesystem::path& checkpoints_dir, int64_t keep_last);

}  // namespace ptrain::checkpoint
