#include "core/log/failpoint.h"

#include <signal.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ptrain::failpoint {
namespace {

struct StepSpec {
  int64_t step = 0;
  std::optional<int> rank;  // nullopt: every rank
};

// "2:1,5" → {{2, 1}, {5, every rank}}.
std::vector<StepSpec> parse_step_specs(const char* text) {
  std::vector<StepSpec> specs;
  if (text == nullptr) return specs;
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    const size_t colon = entry.find(':');
    StepSpec spec;
    spec.step = std::atoll(entry.substr(0, colon).c_str());
    if (colon != std::string::npos) spec.rank = std::atoi(entry.c_str() + colon + 1);
    specs.push_back(spec);
  }
  return specs;
}

const std::vector<StepSpec>& specs_of(StepFault fault) {
  static const std::vector<StepSpec> nonfinite = parse_step_specs(std::getenv("PTRAIN_TEST_NAN_AT"));
  static const std::vector<StepSpec> stop = parse_step_specs(std::getenv("PTRAIN_TEST_STOP_AT"));
  return fault == StepFault::kNonfiniteGradient ? nonfinite : stop;
}

}  // namespace

bool armed(StepFault fault, int64_t step, int rank) {
  for (const StepSpec& spec : specs_of(fault)) {
    if (spec.step == step && (!spec.rank || *spec.rank == rank)) return true;
  }
  return false;
}

void kill_point(const char* point) {
  const char* wanted = std::getenv("PTRAIN_TEST_KILL_AT");
  if (wanted == nullptr) return;
  const std::string spec = wanted;
  const size_t colon = spec.find(':');
  if (spec.substr(0, colon) != point) return;
  static std::map<std::string, int> times_reached;
  const int nth = colon == std::string::npos ? 1 : std::atoi(spec.c_str() + colon + 1);
  if (++times_reached[point] == nth) ::raise(SIGKILL);
}

}  // namespace ptrain::failpoint
