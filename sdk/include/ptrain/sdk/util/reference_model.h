// The frozen reference model a loss compares the policy with (DPO, GRPO's KL term).
#pragma once

#include "ptrain/sdk/context.h"

#include <memory>
#include <string>

namespace ptrain::sdk {

// The model directory `dir`, or a frozen copy of the current policy when
// `dir` is empty. Throws ModelError starting with `where` (the config key's
// "file:line: key ..." prefix) when its vocabulary differs from the policy's.
std::unique_ptr<LanguageModel> load_reference_model(Context& ctx, const std::string& dir, const std::string& where);

}  // namespace ptrain::sdk
