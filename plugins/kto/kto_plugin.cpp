// The exported entry of the KTO plugin library.
#include "kto_module.h"

#include "ptrain/sdk/plugin.h"

namespace {

ptrain::sdk::TrainModule* create_kto_module() { return new ptrain::kto::KtoModule(); }

}  // namespace

PTRAIN_DEFINE_PLUGIN("kto", "0.1.0",
                     "KTO: unpaired desirable/undesirable completions against a frozen reference, z0 over each "
                     "global batch (as TRL's KTOTrainer)",
                     ptrain::kto::declare_kto_config, create_kto_module)
