#include "core/train/model_export.h"

#include "core/checkpoint/checkpoint.h"

namespace ptrain::train {
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
                  const checkpoint::ModelDirFiles& files, const std::filesystem::path& target) {
  // A LoRA run's directory is its adapter; lora.save_merged adds the model with ΔW folded in.
  const std::unique_ptr<model::CausalLm> merged =
      policy.lora() && config.lora.save_merged ? policy.merged_copy() : nullptr;
  checkpoint::save_model_atomically(policy, target, export_dtype(config.checkpoint.save_dtype, policy), files,
                                    merged.get());
}

}  // namespace ptrain::train
