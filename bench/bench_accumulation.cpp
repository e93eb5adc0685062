// Accumulation overhead: SFT tokens/s of ptrain's update step at
// accumulation 8 against accumulation 1, with the same microbatch size, in one
// process and interleaved step by step.
//
// Why not two `ptrain train` runs: on a shared machine the load changes from
// one minute to the next, and two processes a minute apart see different
// machines. Here the two settings alternate within one process (A then B,
// then B then A, ...), each timing exactly what the launcher's loop does per
// update: accumulate_gradients (prepare, forward, backward of every
// microbatch), metric reduction, gradient clipping and the AdamW step. Both
// settings time the same number of microbatches.
//
//   build/bin/bench_accumulation CONFIG [rounds]
//
// CONFIG is an SFT config whose batch.global_size is 8 × batch.micro_size
// (bench/run_all.sh writes one); the accumulation-1 steps use global_size =
// micro_size. A round is one accumulation-8 update and eight accumulation-1
// updates; the first round warms up. Prints one JSON object with tokens/s
// (and every update's seconds on stderr).
#include "core/config/config_loader.h"
#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/plugin/host_context.h"
#include "core/train/optimizer.h"
#include "core/train/run_setup.h"
#include "core/train/update_step.h"
#include "sft_module.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace ptrain;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_accumulation CONFIG [rounds]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::max(2, std::atoi(argv[2])) : 4;
  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  const config::RunConfig run = config::ConfigDocument::load(argv[1], {}).resolve(schema);
  at::set_num_threads(static_cast<int>(run.runtime.threads > 0 ? run.runtime.threads : 2));
  const sdk::MicrobatchPlan plan = train::microbatch_plan(run);
  const int64_t micro = plan.micro_size;
  constexpr int64_t kAccumulation = 8;
  if (micro <= 0 || run.batch.global_size != kAccumulation * micro) {
    std::fprintf(stderr, "%s: batch.global_size must be 8 x batch.micro_size\n", argv[1]);
    return 2;
  }

  // Built as `ptrain train` builds it (train::load_run_parts), with the SFT module compiled in.
  auto communicator = dist::make_single_process_communicator();
  train::RunParts parts = train::load_run_parts(run, train::compiled_module<sft::SftModule>(), at::kCPU, *communicator);
  parts.prepare_dataset({});
  const std::vector<sdk::Example>& examples = parts.examples;
  const model::CausalLm& model = *parts.policy;
  plugin::HostContext& context = *parts.context;
  sdk::TrainModule& module = *parts.module;
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : model.named_parameters()) parameters.push_back(parameter);
  metrics::MetricReducer reducer(train::step_metric_specs(module));
  train::ParameterOptimizer optimizer(run.optim, model.named_parameters());
  dist::GradientSynchronizer grad_sync(parameters, *communicator, 1 << 20);

  size_t next_example = 0;
  // One update over `count` examples; returns its seconds and adds its tokens.
  const auto update = [&](int64_t count, int64_t& tokens) {
    std::vector<const sdk::Example*> batch;
    for (int64_t i = 0; i < count; ++i) batch.push_back(&examples[next_example++ % examples.size()]);
    const auto start = std::chrono::steady_clock::now();
    train::accumulate_gradients({module, "bench", context, parameters, *communicator, grad_sync}, batch, plan, reducer);
    const auto reduced = reducer.reduce(*communicator);
    train::clip_grad_norm(parameters, run.optim.clip_grad_norm);
    optimizer.step(run.optim.lr);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tokens += static_cast<int64_t>(reduced.at("core/tokens"));
    std::fprintf(stderr, "update of %lld examples: %.3f s\n", static_cast<long long>(count), seconds);
    return seconds;
  };

  double seconds[2] = {0, 0};  // [accumulation 1, accumulation 8]
  int64_t tokens[2] = {0, 0};
  for (int round = 0; round < rounds; ++round) {
    int64_t round_tokens[2] = {0, 0};
    double round_seconds[2] = {0, 0};
    const bool eight_first = round % 2 == 1;  // A B, B A, ...: both see the same drift
    for (const bool eight : {eight_first, !eight_first}) {
      if (eight) {
        round_seconds[1] += update(kAccumulation * micro, round_tokens[1]);
      } else {
        for (int64_t k = 0; k < kAccumulation; ++k) round_seconds[0] += update(micro, round_tokens[0]);
      }
    }
    if (round == 0) continue;  // warm-up
    for (int side = 0; side < 2; ++side) {
      seconds[side] += round_seconds[side];
      tokens[side] += round_tokens[side];
    }
  }
  std::printf("{\"tokens_per_s_accum_1\": %.6g, \"tokens_per_s_accum_8\": %.6g, \"micro_size\": %lld, "
              "\"measured_rounds\": %d, \"threads\": %d}\n",
              tokens[0] / seconds[0], tokens[1] / seconds[1], static_cast<long long>(micro), rounds - 1,
              at::get_num_threads());
  return 0;
}
