// [module] settings of the KTO plugin (docs/kto.md).
#pragma once

#include "ptrain/sdk/config_schema.h"

#include <string>

namespace ptrain::kto {

// TRL's KTOConfig.loss_type.
enum class KtoLossType {
  kKto,              // KTO (Ethayarajh et al. 2024, eq. 7-8): value relative to the KL reference point z0
  kApoZeroUnpaired,  // unpaired APO-zero (D'Oosterlinck et al. 2024): no reference point, no KL pairs
};

// The defaults live with the keys (kto_config.cpp); the zeros below are only
// the state of a config nothing was read into.
struct KtoConfig {
  KtoLossType loss_type = KtoLossType::kKto;
  double beta = 0.0;                // β: how far the policy may move from the reference
  double desirable_weight = 0.0;    // λ_D: weight of a desirable example's loss
  double undesirable_weight = 0.0;  // λ_U: weight of an undesirable example's loss
  std::string reference_model;      // a model directory; empty: a frozen copy of the initial policy

  // Whether the loss reads the KL reference point z0 (it takes a forward of
  // every example's mismatched KL pair, with the policy and the reference).
  bool uses_reference_point() const { return loss_type == KtoLossType::kKto; }
};

void declare_kto_config(sdk::ConfigSchema& schema);
KtoConfig read_kto_config(const sdk::ConfigValues& values);

}  // namespace ptrain::kto
