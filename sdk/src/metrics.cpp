#include "ptrain/sdk/metrics.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <sstream>

namespace ptrain::sdk {

const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::kSum:
      return "sum";
    case Reduction::kMean:
      return "mean";
    case Reduction::kMax:
      return "max";
    case Reduction::kMin:
      return "min";
    case Reduction::kWeightedMean:
      return "weighted_mean";
  }
  return "unknown";
}

namespace {

// Detached (a metric never takes part in the loss's graph), double, one element.
at::Tensor metric_scalar(const at::Tensor& value, const std::string& name, const char* role) {
  if (!value.defined() || value.numel() != 1) {
    std::ostringstream shape;
    if (value.defined()) shape << value.sizes();
    throw PluginError("metric '" + name + "': its " + role + " must be a tensor of one element, got " +
                      (value.defined() ? "shape " + shape.str() : std::string("an undefined tensor")));
  }
  return value.detach().to(at::kDouble).reshape({});
}

}  // namespace

void MetricList::add(std::string name, const at::Tensor& value, double weight) {
  at::Tensor value_scalar = metric_scalar(value, name, "value");
  values_.push_back({std::move(name), 0.0, weight, std::move(value_scalar), {}});
}

void MetricList::add(std::string name, const at::Tensor& value, const at::Tensor& weight) {
  at::Tensor value_scalar = metric_scalar(value, name, "value");
  at::Tensor weight_scalar = metric_scalar(weight, name, "weight");
  values_.push_back({std::move(name), 0.0, 1.0, std::move(value_scalar), std::move(weight_scalar)});
}

}  // namespace ptrain::sdk
