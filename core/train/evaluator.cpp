#include "core/train/evaluator.h"

#include "core/log/logger.h"
#include "core/log/step_phases.h"
#include "core/metrics/metric_reducer.h"
#include "core/train/global_batches.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

namespace ptrain::train {
namespace {

constexpr const char* kEvalTokens = "core/eval_tokens";

std::string sum_metric(const sdk::LossTerm& term) { return "core/eval_sum/" + term.name; }
std::string units_metric(const sdk::LossTerm& term) { return "core/eval_units/" + term.name; }

// The plugin's metrics and, per loss term, its loss sum and units: all
// reduced in the same two collectives as a step's metrics.
std::vector<sdk::MetricSpec> eval_specs(const sdk::TrainModule& module) {
  std::vector<sdk::MetricSpec> specs{{kEvalTokens, sdk::Reduction::kSum}};
  for (const sdk::LossTerm& term : module.loss_terms()) {
    specs.push_back({sum_metric(term), sdk::Reduction::kSum});
    specs.push_back({units_metric(term), sdk::Reduction::kSum});
  }
  for (const sdk::MetricSpec& spec : module.metric_specs()) specs.push_back(spec);
  return specs;
}

// Running sums of one rank's evaluation, per loss term.
struct TermSums {
  std::vector<at::Tensor> loss_sums;  // 0-dim float64 on the loss's device, or undefined
  std::vector<int64_t> units;
};

void add_microbatch(const EvalParts& parts, const std::vector<sdk::LossTerm>& terms, sdk::Microbatch& microbatch,
                    TermSums& sums, metrics::MetricReducer& reducer) {
  const std::string plugin = "plugin '" + parts.plugin_name + "': ";
  const std::vector<int64_t> units = parts.module.count_units(microbatch);
  if (units.size() != terms.size()) {
    throw sdk::PluginError(plugin + "count_units returned " + std::to_string(units.size()) + " counts for " +
                           std::to_string(terms.size()) + " loss terms (evaluation)");
  }
  microbatch.to_device(parts.context.device());  // as in the update step: after the host count
  const sdk::LossOut out = parts.module.microbatch_loss(parts.context, microbatch);
  if (out.loss_sums.size() != terms.size()) {
    throw sdk::PluginError(plugin + "microbatch_loss returned " + std::to_string(out.loss_sums.size()) +
                           " loss sums for " + std::to_string(terms.size()) + " loss terms (evaluation)");
  }
  for (size_t j = 0; j < terms.size(); ++j) {
    const at::Tensor& sum = out.loss_sums[j];
    if (!sum.defined() || sum.numel() != 1) {
      throw sdk::PluginError(plugin + "loss term '" + terms[j].name + "' is not a scalar (evaluation)");
    }
    const at::Tensor value = sum.detach().reshape({}).to(at::kDouble);
    sums.loss_sums[j] = sums.loss_sums[j].defined() ? sums.loss_sums[j] + value : value;
    sums.units[j] += units[j];
  }
  reducer.add(out.metrics);
  reducer.add(kEvalTokens, static_cast<double>(microbatch.num_tokens));
}

// eval/loss and, with several terms, eval/loss/<term>: each term's global sum
// over its divisor. Without units anywhere the loss is left out (a mean of nothing).
void add_losses(const std::vector<sdk::LossTerm>& terms, const std::map<std::string, double>& reduced,
                std::map<std::string, double>& metrics) {
  double loss = 0.0;
  bool any_units = false;
  for (const sdk::LossTerm& term : terms) {
    const double units = reduced.at(units_metric(term));
    if (units <= 0.0) continue;
    any_units = true;
    const double divisor = term.divisor == sdk::TermDivisor::kOne ? 1.0 : units;
    const double share = reduced.at(sum_metric(term)) / divisor;
    loss += share;
    if (terms.size() > 1) metrics["eval/loss/" + term.name] = share;
  }
  if (any_units) metrics["eval/loss"] = loss;
}

void log_evaluation(int64_t step, const EvalResult& result, size_t examples) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f s", result.seconds);
  std::ostringstream line;
  line << "step " << step << ": " << examples << " held-out examples in " << seconds;
  for (const auto& [name, value] : result.metrics) line << ", " << name << " " << value;
  log::info("eval", line.str());
}

}  // namespace

std::vector<std::string> eval_metric_names(const sdk::TrainModule& module, const config::EvalSection& eval) {
  std::vector<std::string> names{"eval/loss"};
  const std::vector<sdk::LossTerm> terms = module.loss_terms();
  if (terms.size() > 1) {
    for (const sdk::LossTerm& term : terms) names.push_back("eval/loss/" + term.name);
  }
  for (const sdk::MetricSpec& spec : module.metric_specs()) names.push_back("eval/" + spec.name);
  for (const std::string& name : generation_eval_metric_names(eval)) names.push_back(name);
  return names;
}

Evaluator::Evaluator(EvalParts parts, int64_t every_steps) : parts_(std::move(parts)), every_steps_(every_steps) {}

EvalResult Evaluator::after_step(int64_t completed_steps, bool last_step) {
  if (parts_.examples.empty()) return {};
  const bool due = last_step || (every_steps_ > 0 && completed_steps % every_steps_ == 0);
  if (!due) return {};
  const log::PhaseScope phase(log::StepPhase::kEval);
  EvalResult result = evaluate();
  log_evaluation(completed_steps, result, parts_.examples.size());
  return result;
}

EvalResult Evaluator::evaluate() {
  const auto start = std::chrono::steady_clock::now();
  const at::NoGradGuard no_grad;  // the model has no dropout, so no train/eval mode to switch
  const std::vector<sdk::LossTerm> terms = parts_.module.loss_terms();
  metrics::MetricReducer reducer(eval_specs(parts_.module));
  TermSums sums{std::vector<at::Tensor>(terms.size()), std::vector<int64_t>(terms.size(), 0)};

  // In chunks of a global batch, so that memory stays that of a step (GRPO
  // generates a chunk's completions at once); every rank prepares every
  // chunk, even with no example of it, as a plugin's prepare may be collective.
  const auto total = static_cast<int64_t>(parts_.examples.size());
  const int rank = parts_.communicator.rank();
  const int world_size = parts_.communicator.world_size();
  for (int64_t begin = 0; begin < total; begin += parts_.chunk_size) {
    const int64_t end = std::min(total, begin + parts_.chunk_size);
    // This rank's share: examples i of [begin, end) with i mod R = rank.
    const sdk::GlobalBatch chunk = held_out_global_batch(parts_.examples, begin, end, rank, world_size);
    parts_.context.set_global_batch(chunk);
    for (const auto& microbatch : parts_.module.prepare_eval(parts_.context, rank_share(chunk), parts_.plan)) {
      add_microbatch(parts_, terms, *microbatch, sums, reducer);
    }
  }
  for (size_t j = 0; j < terms.size(); ++j) {
    const double sum = sums.loss_sums[j].defined() ? sums.loss_sums[j].item<double>() : 0.0;
    reducer.add(sum_metric(terms[j]), sum);
    reducer.add(units_metric(terms[j]), static_cast<double>(sums.units[j]));
  }
  const std::map<std::string, double> reduced = reducer.reduce(parts_.communicator);

  EvalResult result;
  result.ran = true;
  add_losses(terms, reduced, result.metrics);
  for (const auto& [name, value] : reduced) {
    if (name.rfind("core/", 0) != 0) result.metrics["eval/" + name] = value;
  }
  result.metrics["eval/tokens"] = reduced.at(kEvalTokens);
  if (parts_.generation != nullptr) {
    GenerationEval::Result generated = parts_.generation->evaluate(parts_.communicator);
    result.metrics.insert(generated.metrics.begin(), generated.metrics.end());
    result.samples = std::move(generated.samples);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace ptrain::train
