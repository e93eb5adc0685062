// The exported entry of the SFT plugin library.
#include "sft_module.h"

#include "ptrain/sdk/plugin.h"

namespace {

ptrain::sdk::TrainModule* create_sft_module() { return new ptrain::sft::SftModule(); }

}  // namespace

PTRAIN_DEFINE_PLUGIN("sft", "0.1.0", "Supervised fine-tuning: completion-only NLL, five loss aggregation modes",
                     ptrain::sft::declare_sft_config, create_sft_module)
