#include "ptrain/sdk/metrics.h"

namespace ptrain::sdk {

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::kSum: return "sum";
    case Reduction::kMean: return "mean";
    case Reduction::kMax: return "max";
    case Reduction::kMin: return "min";
    case Reduction::kWeightedMean: return "weighted_mean";
  }
  return "unknown";
}

}  // namespace ptrain::sdk
