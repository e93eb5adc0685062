// The exported entry of the ORPO plugin library: name, version, one-line
// description, config schema and factory (ptrain/sdk/plugin.h).
#include "orpo_module.h"

#include "ptrain/sdk/plugin.h"

namespace {

ptrain::sdk::TrainModule* create_orpo_module() { return new orpo::OrpoModule(); }

}  // namespace

PTRAIN_DEFINE_PLUGIN("orpo", "0.1.0", "ORPO: chosen NLL + λ·odds-ratio preference loss, no reference model",
                     orpo::declare_orpo_config, create_orpo_module)
