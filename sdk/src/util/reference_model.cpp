#include "ptrain/sdk/util/reference_model.h"

#include "ptrain/sdk/errors.h"

namespace ptrain::sdk {

std::unique_ptr<LanguageModel> load_reference_model(Context& ctx, const std::string& dir, const std::string& where) {
  std::unique_ptr<LanguageModel> reference = dir.empty() ? ctx.frozen_policy_copy() : ctx.load_frozen_model(dir);
  if (reference->vocab_size() != ctx.policy().vocab_size()) {
    throw ModelError(where + ": the reference model's vocab_size " + std::to_string(reference->vocab_size()) +
                     " differs from the policy's " + std::to_string(ctx.policy().vocab_size()));
  }
  return reference;
}

}  // namespace ptrain::sdk
