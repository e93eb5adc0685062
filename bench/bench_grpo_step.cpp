// GRPO rollouts and updates on the bundled SFT job's model size (random
// weights, so completions run to their token limit):
//   1. rollout tokens/s with the KV cache vs recomputing the whole prefix
//      every token (the same engine with use_kv_cache = false);
//   2. wall time of one GRPO update at accumulation 8 (8 prompts × 8
//      completions, micro_size 8) with the rollouts generated once per
//      effective batch (one decoding batch of 64) vs once per microbatch
//      (generation_batch_size 8: eight decoding batches of 8, as trainers
//      that generate inside the microbatch loop do).
//
//   build/bin/bench_grpo_step [repeats] [threads] [device]     device: cpu (default) or cuda
#include "core/config/config_loader.h"
#include "core/dist/communicator.h"
#include "core/generation/rollout_engine.h"
#include "core/metrics/metric_reducer.h"
#include "core/plugin/host_context.h"
#include "core/train/run_setup.h"
#include "core/train/update_step.h"
#include "grpo_module.h"
#include "sft_config.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

using namespace ptrain;

namespace {

double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

sdk::ConfigValues grpo_values(int64_t generation_batch_size) {
  sdk::ConfigSchema schema;
  grpo::declare_grpo_config(schema);
  sdk::ConfigValues values = sdk::ConfigValues::defaults_of(schema, "module");
  values.set("num_generations", int64_t{8}, "bench", true);
  values.set("max_completion_length", int64_t{16}, "bench", true);
  values.set("generation_batch_size", generation_batch_size, "bench", true);
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  // Default: every core, as `ptrain train` with runtime.threads = 0.
  at::set_num_threads(argc > 2 ? std::max(1, std::atoi(argv[2]))
                               : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // The bundled SFT job's model sizes (configs/sft.toml), randomly initialised.
  sdk::ConfigSchema sft_schema;
  sft::declare_sft_config(sft_schema);
  const config::RunConfig sft_run = config::ConfigDocument::load(PTRAIN_BENCH_CONFIG, {}).resolve(sft_schema);
  const at::Device device(argc > 3 ? argv[3] : "cpu");
  auto communicator = dist::make_single_process_communicator();
  // Built as `ptrain train` builds it (train::load_run_parts), with the GRPO
  // module compiled in and these [module] settings: the same seeded policy
  // for every setting, on the arithmetic prompts.
  const auto build = [&](int64_t generation_batch_size) {
    config::RunConfig run = sft_run;
    run.module = grpo_values(generation_batch_size);
    run.data.train = (std::filesystem::path(PTRAIN_SOURCE_DIR) / "data/arith_grpo/train.jsonl").string();
    train::RunParts parts = train::load_run_parts(run, train::compiled_module<grpo::GrpoModule>(), device, *communicator);
    parts.prepare_dataset({});
    return parts;
  };
  train::RunParts rollout_parts = build(0);
  model::CausalLm& model = *rollout_parts.policy;
  const sdk::Tokenizer& tokenizer = *rollout_parts.tokenizer;
  const std::vector<sdk::Example>& examples = rollout_parts.examples;

  // 1. Rollout tokens/s.
  generation::CausalLmRolloutEngine engine(model, tokenizer);
  std::vector<sdk::RolloutRequest> requests;
  for (int64_t p = 0; p < 8; ++p) {
    std::vector<int64_t> ids{tokenizer.bos_id()};
    for (const int64_t id : tokenizer.encode(examples[p].fields["prompt"].get<std::string>())) ids.push_back(id);
    for (int64_t g = 0; g < 8; ++g) requests.push_back({ids, p, g});
  }
  sdk::SamplingParams params;
  params.max_new_tokens = 24;
  params.stop_at_eos = false;
  double rollout_tokens_per_s[2] = {0, 0};
  for (const bool use_cache : {true, false}) {
    params.use_kv_cache = use_cache;
    engine.generate(requests, params);  // warm-up
    int64_t tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) {
      for (const sdk::Rollout& rollout : engine.generate(requests, params)) {
        tokens += static_cast<int64_t>(rollout.completion_ids.size());
      }
    }
    rollout_tokens_per_s[use_cache ? 0 : 1] = static_cast<double>(tokens) / seconds(start);
  }

  // 2. One update at accumulation 8.
  const sdk::MicrobatchPlan plan{8, 0};
  double update_s[2] = {0, 0};
  for (const int64_t generation_batch : {int64_t{0}, int64_t{8}}) {
    train::RunParts parts = build(generation_batch);
    std::vector<const sdk::Example*> batch;
    for (int64_t i = 0; i < 8; ++i) batch.push_back(&parts.examples.at(i));
    std::vector<at::Tensor> parameters;
    for (const auto& [name, parameter] : parts.policy->named_parameters()) parameters.push_back(parameter);
    sdk::TrainModule& module = *parts.module;
    plugin::HostContext& context = *parts.context;
    metrics::MetricReducer reducer(train::step_metric_specs(module));
    dist::GradientSynchronizer grad_sync(parameters, *communicator, 1 << 20);
    train::accumulate_gradients({module, "bench", context, parameters, *communicator, grad_sync}, batch, plan, reducer);
    reducer.reduce(*communicator);  // warm-up
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) {
      context.set_step(r + 1, 0);
      train::accumulate_gradients({module, "bench", context, parameters, *communicator, grad_sync}, batch, plan,
                                  reducer);
      reducer.reduce(*communicator);
    }
    update_s[generation_batch == 0 ? 0 : 1] = seconds(start) / repeats;
  }

  std::printf("%-58s %12s %12s %8s\n", "figure", "ptrain", "baseline", "ratio");
  std::printf("%-58s %12.0f %12.0f %8.2f\n", "rollout tokens/s: KV cache vs recompute (64 seqs, 24 new)",
              rollout_tokens_per_s[0], rollout_tokens_per_s[1], rollout_tokens_per_s[0] / rollout_tokens_per_s[1]);
  std::printf("%-58s %12.3f %12.3f %8.2f\n", "update s at accum 8: generate once per step vs per microbatch",
              update_s[0], update_s[1], update_s[1] / update_s[0]);
  std::printf("threads: %d, repeats: %d, model: %lld parameters on %s\n", at::get_num_threads(), repeats,
              static_cast<long long>(model.num_parameters()), device.str().c_str());
  // The same figures as one JSON line, for bench/run_all.sh.
  std::printf(
      "{\"rollout_tokens_per_s_kv_cache\": %.6g, \"rollout_tokens_per_s_recompute\": %.6g, "
      "\"update_s_once_per_step\": %.6g, \"update_s_per_microbatch\": %.6g}\n",
      rollout_tokens_per_s[0], rollout_tokens_per_s[1], update_s[0], update_s[1]);
  return 0;
}
