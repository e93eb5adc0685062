// Text tests on Hugging Face parameter and architecture names
// ("model.layers.0.input_layernorm.weight", "LlamaForSequenceClassification").
#pragma once

#include <string>

namespace ptrain::model {

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace ptrain::model
