// [module] settings of the ORPO plugin.
#pragma once

#include "ptrain/sdk/config_schema.h"

namespace orpo {

// The default lives with the key (orpo_config.cpp).
struct OrpoConfig {
  double lambda = 0.0;  // λ: weight of the odds-ratio loss against the chosen NLL
};

// The keys `ptrain validate` checks and `ptrain plugins --describe orpo` prints.
void declare_orpo_config(ptrain::sdk::ConfigSchema& schema);

OrpoConfig read_orpo_config(const ptrain::sdk::ConfigValues& values);

}  // namespace orpo
