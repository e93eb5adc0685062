#include "core/train/test_hooks.h"

#include <cstdlib>
#include <sstream>
#include <string>

namespace ptrain::train {

bool test_hook_at(const char* variable, int64_t step, int rank) {
  const char* spec = std::getenv(variable);
  if (spec == nullptr) return false;
  std::stringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    const size_t colon = entry.find(':');
    const bool step_matches = std::atoll(entry.substr(0, colon).c_str()) == step;
    const bool rank_matches = colon == std::string::npos || std::atoi(entry.c_str() + colon + 1) == rank;
    if (step_matches && rank_matches) return true;
  }
  return false;
}

}  // namespace ptrain::train
