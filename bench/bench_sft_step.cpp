// Tokens/s of one SFT update on the bundled job's model and data: ptrain's
// update step (target-only log-probs, exact accumulation, AdamW) next to a
// baseline measured in the same run: the textbook loop that computes a full
// log_softmax over the vocabulary and averages per microbatch.
//
//   build/bin/bench_sft_step [steps]
#include "core/config/config_loader.h"
#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/model/causal_lm.h"
#include "core/plugin/host_context.h"
#include "core/train/optimizer.h"
#include "core/train/run_setup.h"
#include "core/train/update_step.h"
#include "sft_module.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <cstdio>

using namespace ptrain;

namespace {

double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  // As `ptrain train` does with runtime.threads = 0: every core of the process.
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // The bundled job's model, batch, optimizer and [module] settings, read from its config.
  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  config::RunConfig run = config::ConfigDocument::load(PTRAIN_BENCH_CONFIG, {}).resolve(schema);
  run.data.train = (std::filesystem::path(PTRAIN_SOURCE_DIR) / run.data.train).string();
  const sdk::MicrobatchPlan plan = train::microbatch_plan(run);
  const double lr = run.optim.lr;

  // Built as `ptrain train` builds it (train::load_run_parts), with the SFT module compiled in.
  auto communicator = dist::make_single_process_communicator();
  train::RunParts parts = train::load_run_parts(run, train::compiled_module<sft::SftModule>(), at::kCPU, *communicator);
  parts.prepare_dataset({});
  std::vector<const sdk::Example*> batch;
  for (int64_t i = 0; i < run.batch.global_size; ++i) batch.push_back(&parts.examples.at(i));
  model::CausalLm& model = *parts.policy;
  plugin::HostContext& context = *parts.context;
  sdk::TrainModule& module = *parts.module;
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : model.named_parameters()) parameters.push_back(parameter);

  metrics::MetricReducer reducer(train::step_metric_specs(module));
  train::ParameterOptimizer optimizer(run.optim, model.named_parameters());
  dist::GradientSynchronizer grad_sync(parameters, *communicator, 1 << 20);

  // ptrain's update step.
  int64_t tokens = 0;
  auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps + 1; ++step) {
    if (step == 1) start = std::chrono::steady_clock::now();  // first step warms up
    train::accumulate_gradients({module, "bench", context, parameters, *communicator, grad_sync}, batch, plan, reducer);
    const auto reduced = reducer.reduce(*communicator);
    if (step >= 1) tokens += static_cast<int64_t>(reduced.at("core/tokens"));
    train::clip_grad_norm(parameters, run.optim.clip_grad_norm);
    optimizer.step(lr);
  }
  const double ptrain_tokens_per_s = static_cast<double>(tokens) / seconds(start);

  // Baseline: full-vocabulary log_softmax, loss averaged per microbatch.
  auto microbatches = module.prepare(context, batch, plan);
  train::ParameterOptimizer baseline_optimizer(run.optim, model.named_parameters());
  tokens = 0;
  for (int step = 0; step < steps + 1; ++step) {
    if (step == 1) start = std::chrono::steady_clock::now();
    for (const at::Tensor& parameter : parameters) parameter.mutable_grad() = at::Tensor();
    for (const auto& microbatch : microbatches) {
      const auto& tokens_batch = static_cast<const sft::SftMicrobatch&>(*microbatch).tokens;
      const at::Tensor log_probs = at::log_softmax(model.logits(tokens_batch.input_ids), -1);
      const at::Tensor picked = log_probs.gather(-1, tokens_batch.target_ids.clamp_max(model.vocab_size() - 1).unsqueeze(-1)).squeeze(-1);
      const at::Tensor loss = -picked.masked_select(tokens_batch.loss_mask).mean() / static_cast<double>(microbatches.size());
      loss.backward();
      if (step >= 1) tokens += microbatch->num_tokens;
    }
    train::clip_grad_norm(parameters, run.optim.clip_grad_norm);
    baseline_optimizer.step(lr);
  }
  const double baseline_tokens_per_s = static_cast<double>(tokens) / seconds(start);

  std::printf("%-44s %14s %14s %8s\n", "figure", "ptrain", "baseline", "ratio");
  std::printf("%-44s %14.0f %14.0f %8.2f\n", "SFT update tokens/s (bundled model, 1 proc)", ptrain_tokens_per_s,
              baseline_tokens_per_s, ptrain_tokens_per_s / baseline_tokens_per_s);
  std::printf("threads: %d, steps timed: %d, global batch %lld, micro %lld\n", at::get_num_threads(), steps,
              static_cast<long long>(run.batch.global_size), static_cast<long long>(plan.micro_size));
  return 0;
}
