#include "orpo_config.h"

#include "ptrain/sdk/util/config_binder.h"

namespace orpo {
namespace {

// One line per key gives its schema, its reader and its writer.
const ptrain::sdk::ConfigBinder<OrpoConfig>& binder() {
  static const auto binder = ptrain::sdk::ConfigBinder<OrpoConfig>().key(
      "lambda", &OrpoConfig::lambda, 0.1,
      "λ: weight of the odds-ratio loss −log σ(log odds(chosen) − log odds(rejected)) added to the chosen answer's "
      "NLL per token (the paper uses 0.1 to 0.25)",
      ptrain::sdk::at_least(0.0));
  return binder;
}

}  // namespace

void declare_orpo_config(ptrain::sdk::ConfigSchema& schema) { binder().declare(schema); }

OrpoConfig read_orpo_config(const ptrain::sdk::ConfigValues& values) { return binder().read(values); }

}  // namespace orpo
