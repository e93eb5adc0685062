// The exported entry of the GRPO plugin library.
#include "grpo_module.h"

#include "ptrain/sdk/plugin.h"

namespace {

ptrain::sdk::TrainModule* create_grpo_module() { return new ptrain::grpo::GrpoModule(); }

}  // namespace

PTRAIN_DEFINE_PLUGIN("grpo", "0.1.0",
                     "Group relative policy optimisation with on-policy rollouts, exact over splits (TRL/verl options)",
                     ptrain::grpo::declare_grpo_config, create_grpo_module)
