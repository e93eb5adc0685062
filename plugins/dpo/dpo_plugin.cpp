// The exported entry of the DPO plugin library.
#include "dpo_module.h"

#include "ptrain/sdk/plugin.h"

namespace {

ptrain::sdk::TrainModule* create_dpo_module() { return new ptrain::dpo::DpoModule(); }

}  // namespace

PTRAIN_DEFINE_PLUGIN("dpo", "0.1.0",
                     "Direct preference optimisation and its variants: 13 pair losses + sft term, exact over splits",
                     ptrain::dpo::declare_dpo_config, create_dpo_module)
