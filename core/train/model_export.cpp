#include "core/train/model_export.h"

#include "core/checkpoint/checkpoint.h"
#include "core/shard/rank_weight_writer.h"
#include "core/shard/shared_staging_dir.h"

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

// checkpoint.save_dtype resolved against the initial model.
at::ScalarType export_dtype(config::SaveDtype choice, const model::CausalLm& policy) {
  switch (choice) {
    case config::SaveDtype::kFloat32:
      return at::kFloat;
    case config::SaveDtype::kBFloat16:
      return at::kBFloat16;
    case config::SaveDtype::kAuto:
      break;
  }
  return policy.stored_dtype();
}

}  // namespace

void export_model(const config::RunConfig& config, const model::CausalLm& policy,
                  const checkpoint::ModelDirFiles& files, const fs::path& target) {
  // A LoRA run's directory is its adapter; lora.save_merged adds the model with ΔW folded in.
  const std::unique_ptr<model::CausalLm> merged =
      policy.lora() && config.lora.save_merged ? policy.merged_copy() : nullptr;
  checkpoint::save_model_atomically(policy, target, export_dtype(config.checkpoint.save_dtype, policy), files,
                                    merged.get());
}

void export_sharded_model(const config::RunConfig& config, const model::CausalLm& policy, shard::ShardedLayers& layers,
                          dist::Communicator& communicator, const checkpoint::ModelDirFiles& files,
                          const fs::path& target) {
  const shard::SharedStagingDir weights(target.parent_path() / ("." + target.filename().string() + ".rank-weights"),
                                        communicator);
  const at::ScalarType dtype = export_dtype(config.checkpoint.save_dtype, policy);
  shard::write_weights_by_rank(policy, layers, communicator, weights.path(), dtype, files.model.max_shard_bytes,
                               target);
  communicator.barrier();  // every rank's files are there
  if (communicator.rank() == 0) {
    checkpoint::save_model_atomically(policy, target, dtype, files, nullptr, weights.path());
  }
  communicator.barrier();  // target is complete before any rank goes on
}

}  // namespace ptrain::train
