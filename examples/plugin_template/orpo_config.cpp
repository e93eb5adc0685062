#include "orpo_config.h"

namespace orpo {

void declare_orpo_config(ptrain::sdk::ConfigSchema& schema) {
  schema.add_float("lambda", 0.1,
                   "λ: weight of the odds-ratio loss −log σ(log odds(chosen) − log odds(rejected)) added to the "
                   "chosen answer's NLL per token (the paper uses 0.1 to 0.25)",
                   0.0);
}

OrpoConfig read_orpo_config(const ptrain::sdk::ConfigValues& values) {
  OrpoConfig config;
  config.lambda = values.get_float("lambda");
  return config;
}

}  // namespace orpo
