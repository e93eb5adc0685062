// Rules about several keys at once (docs/config.md), over the validated
// sections, and the defaults that follow from other keys (tokenizer.kind from
// tokenizer.path, batch.micro_size from batch.global_size). Keys that failed
// their own checks are absent, and no rule reports them again.
#pragma once

#include "core/config/problem_list.h"
#include "ptrain/sdk/config_schema.h"

#include <map>
#include <string>

namespace ptrain::config {

struct WrittenKeys {
  // The file or a --set wrote these keys, even if their values were invalid
  // (and so are absent), in which case nothing is inferred for them.
  bool tokenizer_kind = false;
  bool micro_size_or_tokens = false;
};

// `sections`: validated values by section name ("" the top level). Records a
// problem per broken rule; may fill derived defaults and drops the model
// sizes when model.init is set.
void check_key_combinations(std::map<std::string, sdk::ConfigValues>& sections, ProblemList& problems,
                            const std::string& file, WrittenKeys written);

}  // namespace ptrain::config
