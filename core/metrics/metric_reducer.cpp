#include "core/metrics/metric_reducer.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <limits>

namespace ptrain::metrics {
MetricReducer::MetricReducer(std::vector<sdk::MetricSpec> specs) : specs_(std::move(specs)) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!index_.emplace(specs_[i].name, i).second) {
      throw sdk::PluginError("metric '" + specs_[i].name + "' is declared twice");
    }
  }
  reset();
}

void MetricReducer::reset() {
  slots_.assign(specs_.size(), Slot{});
  tensor_values_.clear();
  for (size_t i = 0; i < specs_.size(); ++i) {
    // Extremes are kept as maxima: min metrics are stored negated.
    slots_[i].extreme = -std::numeric_limits<double>::infinity();
  }
}

size_t MetricReducer::slot_of(const std::string& name) const {
  const auto found = index_.find(name);
  if (found == index_.end()) {
    throw sdk::PluginError("metric '" + name + "' was emitted but not declared in metric_specs()");
  }
  return found->second;
}

void MetricReducer::add(const std::string& name, double value, double weight) {
  add_to_slot(slot_of(name), value, weight);
}

void MetricReducer::add_to_slot(size_t index, double value, double weight) {
  Slot& slot = slots_[index];
  switch (specs_[index].reduction) {
    case sdk::Reduction::kSum:
    case sdk::Reduction::kMean:
      slot.sum += value;
      slot.weight += 1.0;
      break;
    case sdk::Reduction::kWeightedMean:
      slot.sum += value * weight;
      slot.weight += weight;
      break;
    case sdk::Reduction::kMax:
      slot.extreme = std::max(slot.extreme, value);
      slot.weight += 1.0;
      break;
    case sdk::Reduction::kMin:
      slot.extreme = std::max(slot.extreme, -value);
      slot.weight += 1.0;
      break;
  }
}

void MetricReducer::add(const sdk::MetricList& metrics) {
  for (const auto& metric : metrics.values()) {
    if (metric.value_tensor.defined()) {
      tensor_values_.push_back({slot_of(metric.name), metric.value_tensor, metric.weight_tensor, metric.weight});
    } else {
      add(metric.name, metric.value, metric.weight);
    }
  }
}

void MetricReducer::read_tensor_values() {
  if (tensor_values_.empty()) return;
  // One stack and one copy to the host for the whole step, on the first value's device.
  const at::Device device = tensor_values_.front().value.device();
  std::vector<at::Tensor> scalars;
  scalars.reserve(2 * tensor_values_.size());
  // Values already there (all of them, normally) are taken as they are: no op per value.
  const auto on_device = [&](const at::Tensor& t) { return t.device() == device ? t : t.to(device); };
  for (const TensorValue& entry : tensor_values_) scalars.push_back(on_device(entry.value));
  for (const TensorValue& entry : tensor_values_) {
    if (entry.weight.defined()) scalars.push_back(on_device(entry.weight));
  }
  const at::Tensor host = at::stack(scalars).to(at::kCPU).contiguous();
  const double* read = host.data_ptr<double>();
  const double* weights = read + tensor_values_.size();
  for (const TensorValue& entry : tensor_values_) {
    add_to_slot(entry.slot, *read++, entry.weight.defined() ? *weights++ : entry.weight_value);
  }
  tensor_values_.clear();
}

std::map<std::string, double> MetricReducer::reduce(dist::Communicator& communicator) {
  read_tensor_values();
  const auto count = static_cast<int64_t>(specs_.size());
  std::vector<double> packed_sums(2 * count);
  std::vector<double> packed_extremes(count);
  for (int64_t i = 0; i < count; ++i) {
    packed_sums[i] = slots_[i].sum;
    packed_sums[count + i] = slots_[i].weight;
    packed_extremes[i] = slots_[i].extreme;
  }
  std::vector<at::Tensor> sum_pack{at::tensor(packed_sums, at::kDouble)};
  std::vector<at::Tensor> max_pack{at::tensor(packed_extremes, at::kDouble)};
  communicator.all_reduce_sum(sum_pack);
  communicator.all_reduce_max(max_pack);
  const auto sums = sum_pack[0].accessor<double, 1>();
  const auto extremes = max_pack[0].accessor<double, 1>();

  std::map<std::string, double> reduced;
  for (int64_t i = 0; i < count; ++i) {
    const double sum = sums[i];
    const double weight = sums[count + i];
    const sdk::MetricSpec& spec = specs_[i];
    // A sum of nothing is 0; a mean or an extreme of nothing is left out.
    if (spec.reduction == sdk::Reduction::kSum) {
      reduced[spec.name] = sum;
      continue;
    }
    if (weight == 0.0) continue;
    switch (spec.reduction) {
      case sdk::Reduction::kSum: break;
      case sdk::Reduction::kMean:
      case sdk::Reduction::kWeightedMean: reduced[spec.name] = sum / weight; break;
      case sdk::Reduction::kMax: reduced[spec.name] = extremes[i]; break;
      case sdk::Reduction::kMin: reduced[spec.name] = -extremes[i]; break;
    }
  }
  reset();
  return reduced;
}

}  // namespace ptrain::metrics
