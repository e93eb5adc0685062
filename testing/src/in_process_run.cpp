#include "in_process_run.h"

#include "scalar_reads.h"

#include "core/data/global_batch_sampler.h"
#include "core/metrics/metric_reducer.h"
#include "core/train/compute_device.h"
#include "core/train/global_batches.h"
#include "core/train/run_setup.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace ptrain::testing {

InProcessRun::InProcessRun(const plugin::LoadedPlugin& plugin, config::RunConfig config)
    : config_(std::move(config)),
      plugin_name_(plugin.info().name),
      communicator_(dist::make_single_process_communicator()),
      parts_(train::load_run_parts(config_, train::module_factory(plugin), train::resolve_device(config_, 0),
                                   *communicator_)) {
  for (const auto& [name, parameter] : parts_.policy->named_parameters()) parameters_.push_back(parameter);
  grad_sync_ =
      std::make_unique<dist::GradientSynchronizer>(parameters_, *communicator_, config_.distributed.bucket_mb << 20);
  // Later global batches, whole (one process), as the trainer's sampler deals them.
  parts_.prepare_dataset([this](int64_t step) {
    const data::GlobalBatchSampler sampler(static_cast<int64_t>(examples().size()), config_.batch.global_size,
                                           config_.seed);
    return pointers(sampler.global_batch(step));
  });
}

// The module goes before the context and models it may point into.
InProcessRun::~InProcessRun() = default;

StepBatch InProcessRun::step_batch(int64_t step) const {
  const data::GlobalBatchSampler sampler(static_cast<int64_t>(examples().size()), config_.batch.global_size,
                                         config_.seed);
  return {step, sampler.position(step).epoch, sampler.global_batch(step)};
}

void InProcessRun::take_steps(const std::vector<StepBatch>& steps) {
  for (const StepBatch& batch : steps) {
    parts_.context->set_step(batch.step, batch.epoch);
    const StepOutcome outcome = step(batch.indices, {static_cast<int64_t>(batch.indices.size()), 0});
    {
      const at::NoGradGuard no_grad;
      for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].sub_(outcome.gradients[i]);
    }
    parts_.module->end_step(*parts_.context);
  }
}

std::vector<at::Tensor> InProcessRun::parameter_values() const {
  std::vector<at::Tensor> values;
  for (const at::Tensor& parameter : parameters_) values.push_back(parameter.detach().clone());
  return values;
}

std::vector<const sdk::Example*> InProcessRun::pointers(const std::vector<int64_t>& example_indices) const {
  std::vector<const sdk::Example*> selected;
  for (const int64_t index : example_indices) selected.push_back(&examples().at(static_cast<size_t>(index)));
  return selected;
}

std::vector<const sdk::Example*> InProcessRun::start_batch(const std::vector<int64_t>& example_indices) {
  parts_.context->set_global_batch(train::training_global_batch(examples(), example_indices, 0, 1));
  return pointers(example_indices);
}

train::StepParts InProcessRun::step_parts(sdk::TrainModule& module) {
  return {module, plugin_name_, *parts_.context, parameters_, *communicator_, *grad_sync_};
}

StepOutcome InProcessRun::step(const std::vector<int64_t>& example_indices, const sdk::MicrobatchPlan& plan) {
  StepOutcome outcome;
  metrics::MetricReducer reducer(train::step_metric_specs(*parts_.module));
  outcome.result = train::accumulate_gradients(step_parts(*parts_.module), start_batch(example_indices), plan, reducer);
  outcome.metrics = reducer.reduce(*communicator_);
  for (const at::Tensor& parameter : parameters_) outcome.gradients.push_back(parameter.grad().detach().clone());
  return outcome;
}

LoopReads InProcessRun::loop_scalar_reads(const std::vector<int64_t>& example_indices,
                                          const sdk::MicrobatchPlan& plan) {
  LoopReadObserver observed(*parts_.module);
  metrics::MetricReducer reducer(train::step_metric_specs(observed));
  train::accumulate_gradients(step_parts(observed), start_batch(example_indices), plan, reducer);
  reducer.reduce(*communicator_);
  return {observed.microbatches(), observed.reads()};
}

namespace {

// Loss sums accumulate in float32 or wider, on the model's device (docs/plugins.md, "The interface").
std::string placement_problem(const at::Tensor& sum, size_t term, at::Device device) {
  std::string problem;
  if (sum.device() != device) {
    problem +=
        " loss sum " + std::to_string(term) + " is on " + sum.device().str() + ", the model on " + device.str() + ";";
  }
  if (sum.scalar_type() != at::kFloat && sum.scalar_type() != at::kDouble) {
    problem += " loss sum " + std::to_string(term) + " is " + c10::toString(sum.scalar_type()) +
               " (loss sums stay float32 or float64);";
  }
  return problem;
}

}  // namespace

std::vector<MicrobatchUnits> InProcessRun::audit_units(const std::vector<int64_t>& example_indices,
                                                       const sdk::MicrobatchPlan& plan) {
  const auto counts = [this](const sdk::Microbatch& microbatch) { return parts_.module->count_units(microbatch); };
  std::vector<MicrobatchUnits> audits;
  for (const auto& microbatch : parts_.module->prepare(*parts_.context, start_batch(example_indices), plan)) {
    MicrobatchUnits audit;
    audit.before_forward = counts(*microbatch);
    microbatch->to_device(parts_.context->device());  // as the core's update step does
    const sdk::LossOut out = parts_.module->microbatch_loss(*parts_.context, *microbatch);
    for (size_t term = 0; term < out.loss_sums.size(); ++term) {
      const at::Tensor& sum = out.loss_sums[term];
      audit.loss_sums.push_back(sum.defined() ? sum.item<double>() : 0.0);
      if (sum.defined()) audit.placement_problems += placement_problem(sum, term, parts_.context->device());
    }
    audit.after_forward = counts(*microbatch);
    audits.push_back(std::move(audit));
  }
  return audits;
}

}  // namespace ptrain::testing
