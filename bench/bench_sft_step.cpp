// Tokens/s of one SFT update on the bundled job's model and data: ptrain's
// update step (target-only log-probs, exact accumulation, AdamW) next to a
// baseline measured in the same run: the textbook loop that computes a full
// log_softmax over the vocabulary and averages per microbatch.
//
//   build/bin/bench_sft_step [steps]
#include "core/data/jsonl_reader.h"
#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/model/causal_lm.h"
#include "core/plugin/host_context.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/optimizer.h"
#include "core/train/update_step.h"
#include "sft_module.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>

using namespace ptrain;

namespace {

constexpr int64_t kMaxLength = 32;
constexpr int64_t kGlobalBatch = 32;
constexpr int64_t kMicroSize = 16;

model::ModelConfig bundled_model() {
  model::ModelConfig config;
  config.vocab_size = 320;
  config.hidden_size = 256;
  config.intermediate_size = 688;
  config.num_layers = 4;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.max_position_embeddings = 64;
  config.rope_theta = 10000.0;
  config.rms_norm_eps = 1e-6;
  config.tie_word_embeddings = true;
  config.model_type = "llama";
  return config;
}

double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  // As `ptrain train` does with runtime.threads = 0: every core of the process.
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const std::vector<sdk::Example> examples = data::read_jsonl(PTRAIN_BENCH_DATA);
  std::vector<const sdk::Example*> batch;
  for (int64_t i = 0; i < kGlobalBatch; ++i) batch.push_back(&examples[i]);

  const tokenizer::ByteTokenizer tokenizer;
  auto model = model::CausalLm::init_random(bundled_model(), 0);
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : model->named_parameters()) parameters.push_back(parameter);
  config::OptimSection optim{"adamw", 1e-3, 0.0, 0.9, 0.999, 1e-8, 0.0, 1.0, false};

  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  const sdk::ConfigValues values = sdk::ConfigValues::defaults_of(schema, "module");  // token_mean
  auto communicator = dist::make_single_process_communicator();
  plugin::HostContext context(*model, tokenizer, values, *communicator, {0, kMaxLength, 0, 0, ""});
  sft::SftModule module;
  module.setup(context);
  auto specs = train::core_step_metric_specs();
  for (const auto& spec : module.metric_specs()) specs.push_back(spec);
  metrics::MetricReducer reducer(specs);
  train::ParameterOptimizer optimizer(optim, model->named_parameters());
  dist::GradientSynchronizer grad_sync(parameters, *communicator, 1 << 20);

  // ptrain's update step.
  int64_t tokens = 0;
  auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps + 1; ++step) {
    if (step == 1) start = std::chrono::steady_clock::now();  // first step warms up
    train::accumulate_gradients(module, context, batch, {kMicroSize, 0}, parameters, *communicator, grad_sync, reducer);
    const auto reduced = reducer.reduce(*communicator);
    if (step >= 1) tokens += static_cast<int64_t>(reduced.at("core/tokens"));
    train::clip_grad_norm(parameters, 1.0);
    optimizer.step(1e-3);
  }
  const double ptrain_tokens_per_s = static_cast<double>(tokens) / seconds(start);

  // Baseline: full-vocabulary log_softmax, loss averaged per microbatch.
  auto microbatches = module.prepare(context, batch, {kMicroSize, 0});
  train::ParameterOptimizer baseline_optimizer(optim, model->named_parameters());
  tokens = 0;
  for (int step = 0; step < steps + 1; ++step) {
    if (step == 1) start = std::chrono::steady_clock::now();
    for (const at::Tensor& parameter : parameters) parameter.mutable_grad() = at::Tensor();
    for (const auto& microbatch : microbatches) {
      const auto& tokens_batch = static_cast<const sft::SftMicrobatch&>(*microbatch).tokens;
      const at::Tensor log_probs = at::log_softmax(model->logits(tokens_batch.input_ids), -1);
      const at::Tensor picked = log_probs.gather(-1, tokens_batch.target_ids.clamp_max(319).unsqueeze(-1)).squeeze(-1);
      const at::Tensor loss = -picked.masked_select(tokens_batch.loss_mask).mean() / static_cast<double>(microbatches.size());
      loss.backward();
      if (step >= 1) tokens += microbatch->num_tokens;
    }
    train::clip_grad_norm(parameters, 1.0);
    baseline_optimizer.step(1e-3);
  }
  const double baseline_tokens_per_s = static_cast<double>(tokens) / seconds(start);

  std::printf("%-44s %14s %14s %8s\n", "figure", "ptrain", "baseline", "ratio");
  std::printf("%-44s %14.0f %14.0f %8.2f\n", "SFT update tokens/s (bundled model, 1 proc)", ptrain_tokens_per_s,
              baseline_tokens_per_s, ptrain_tokens_per_s / baseline_tokens_per_s);
  std::printf("threads: %d, steps timed: %d, global batch %lld, micro %lld\n", at::get_num_threads(), steps,
              static_cast<long long>(kGlobalBatch), static_cast<long long>(kMicroSize));
  return 0;
}
