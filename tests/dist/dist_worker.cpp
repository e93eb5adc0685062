// A worker the distributed tests run under `ptrain launch`, one mode per
// behaviour under test. It uses the same launch environment, communicator,
// metric reducer and batch selection as `ptrain train`.
//
//   dist_worker env [FAIL_RANK FAIL_CODE]
//   dist_worker metrics
//   dist_worker data DATASET_SIZE GLOBAL_SIZE SEED STEPS
//   dist_worker die|hang|mismatch|loop TIMEOUT_S PID_DIR
//   dist_worker grpo LOSS_TYPE MICRO_SIZE GRADIENT_FILE [KEY=VALUE ...]   ([module] overrides, worker options)
//   dist_worker rollouts SEED TEMPERATURE
//   dist_worker layer_shards|sharded_layers
//   dist_worker full_adamw|rank_weights DIR
//   dist_worker layer_divergence|layer_meeting
//   dist_worker all_gather
#include "grpo_test_support.h"

#include "core/data/global_batch_sampler.h"
#include "core/dist/c10d_communicator.h"
#include "core/dist/launch_env.h"
#include "core/metrics/metric_reducer.h"
#include "core/model/safetensors.h"
#include "core/plugin/host_context.h"
#include "core/train/update_step.h"
#include "grpo_module.h"
#include "ptrain/sdk/errors.h"
#include "worker_layer_shards.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

using namespace ptrain;

namespace {

int run_env(const dist::LaunchEnv& launch, int argc, char** argv) {
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    const char* value = std::getenv(name);
    std::cout << name << "=" << (value ? value : "(unset)") << "\n";
  }
  std::cerr << "a line on stderr\n";
  if (argc >= 4 && std::atoi(argv[2]) == launch.rank) return std::atoi(argv[3]);
  return 0;
}

// Ranks with very different token counts: the weighted mean must be the
// global one (Σ v·w / Σ w), not the mean of the ranks' means.
int run_metrics(const dist::LaunchEnv& launch) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  metrics::MetricReducer reducer({{"accuracy", sdk::Reduction::kWeightedMean},
                                  {"tokens", sdk::Reduction::kSum},
                                  {"worst", sdk::Reduction::kMax},
                                  {"best", sdk::Reduction::kMin},
                                  {"per_microbatch", sdk::Reduction::kMean}});
  // Rank r contributes r+1 microbatches; rank r's accuracy is 1/(r+1) over 10^r tokens.
  const double tokens = std::pow(10.0, launch.rank);
  for (int microbatch = 0; microbatch <= launch.rank; ++microbatch) {
    reducer.add("accuracy", 1.0 / (launch.rank + 1), tokens / (launch.rank + 1));
    reducer.add("tokens", tokens / (launch.rank + 1));
    reducer.add("worst", 10.0 * launch.rank + microbatch);
    reducer.add("best", -10.0 * launch.rank - microbatch);
    reducer.add("per_microbatch", launch.rank);
  }
  const auto reduced = reducer.reduce(*communicator);
  nlohmann::json out = {{"rank", launch.rank}};
  for (const auto& [name, value] : reduced) out[name] = value;
  std::cout << "RESULT " << out.dump() << std::endl;
  return 0;
}

int run_data(const dist::LaunchEnv& launch, char** argv) {
  const data::GlobalBatchSampler sampler(std::atoll(argv[2]), std::atoll(argv[3]), std::strtoull(argv[4], nullptr, 10));
  nlohmann::json steps = nlohmann::json::array();
  for (int64_t step = 0; step < std::atoll(argv[5]); ++step) {
    steps.push_back(data::rank_example_indices(sampler, step, launch.rank, launch.world_size));
  }
  std::cout << "RESULT " << nlohmann::json{{"rank", launch.rank}, {"steps", steps}}.dump() << std::endl;
  return 0;
}

// The plugin's all_gather (sdk::Context) over uneven ranks: rank r gives r
// rows [r, k] (rank 0 none), then one 0-dim value r, then a tensor whose rows
// have r + 1 elements, which every rank must refuse.
int run_all_gather(const dist::LaunchEnv& launch) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(30));
  const auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 31);
  const tokenizer::ByteTokenizer tokenizer;
  const sdk::ConfigValues values("module");
  plugin::HostContext host(*policy, tokenizer, values, *communicator, sdk::RunInfo{});
  std::vector<double> rows;
  for (int k = 0; k < launch.rank; ++k) rows.insert(rows.end(), {static_cast<double>(launch.rank), k + 0.5});
  const at::Tensor gathered = host.all_gather(at::tensor(rows, at::kDouble).reshape({launch.rank, 2}));
  const at::Tensor scalars = host.all_gather(at::tensor(static_cast<int64_t>(launch.rank), at::kLong));
  std::string refused;
  try {
    host.all_gather(at::zeros({1, launch.rank + 1}, at::kFloat));
  } catch (const sdk::PluginError& error) {
    refused = error.what();
  }
  const at::Tensor flat = gathered.contiguous().reshape({-1});
  std::cout << "RESULT "
            << nlohmann::json{{"rank", launch.rank},
                              {"shape", gathered.sizes().vec()},
                              {"rows",
                               std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel())},
                              {"scalars", std::vector<int64_t>(scalars.data_ptr<int64_t>(),
                                                               scalars.data_ptr<int64_t>() + scalars.numel())},
                              {"refused", refused}}
                   .dump()
            << std::endl;
  return 0;
}

// Rank 1 dies, hangs, or all-reduces a tensor of another size after the
// first collective; the others must fail with an error naming the operation
// instead of waiting forever. loop: every rank all-reduces until one fails
// (a node killed from outside). A rank writes its pid once the group is up.
int run_fault(const dist::LaunchEnv& launch, const std::string& mode, char** argv) {
  const std::string pid_dir = argv[3];
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(std::atoi(argv[2])));
  std::vector<at::Tensor> value{at::ones({4})};
  communicator->all_reduce_sum(value);
  std::ofstream(pid_dir + "/rank" + std::to_string(launch.rank) + ".pid") << ::getpid() << "\n";
  while (mode == "loop") {
    communicator->all_reduce_sum(value);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (launch.rank == 1) {
    if (mode == "die") std::_Exit(3);
    if (mode == "mismatch")
      value = {at::ones({8})};
    else
      std::this_thread::sleep_for(std::chrono::seconds(600));
  }
  communicator->all_reduce_sum(value);
  std::cout << "RESULT unexpectedly finished" << std::endl;
  return 0;
}

// The comma-separated items of `text`.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) items.push_back(item);
  return items;
}

// What `dist_worker grpo` runs besides its [module] overrides.
struct GrpoWorkerOptions {
  std::map<std::string, sdk::ConfigValue> overrides;
  double lm_head_scale = 1.0;  // lm_head_scale=F: sharpen the policy (grpo_test::sharpen_lm_head)
  double perturb = 0.0;        // perturb=F: after step 0, grpo_test::perturb_parameters(F), then step 1
  int refill_table = -1;       // refill_table=0|1: grpo_test::refill_epoch_prompts(1), batches of 4 in order
};

// KEY=VALUE arguments: worker options above, or [module] overrides: the
// numbers and flags of kFloatKeys, kIntKeys and kBoolKeys, reward_funcs and
// reward_weights comma-separated lists, the rest strings.
GrpoWorkerOptions grpo_options(int argc, char** argv) {
  static const std::set<std::string> kFloatKeys{
      "beta", "top_entropy_quantile", "cispo_epsilon_low", "cispo_epsilon_high", "sapo_tau_pos", "sapo_tau_neg"};
  static const std::set<std::string> kIntKeys{"num_iterations", "max_generation_rounds"};
  static const std::set<std::string> kBoolKeys{"filter_zero_std_groups"};
  GrpoWorkerOptions options;
  options.overrides["loss_type"] = std::string(argv[2]);
  for (int i = 5; i < argc; ++i) {
    const std::string argument = argv[i];
    const size_t equals = argument.find('=');
    if (equals == std::string::npos) throw sdk::UsageError("expected KEY=VALUE, got '" + argument + "'");
    const std::string key = argument.substr(0, equals);
    const std::string value = argument.substr(equals + 1);
    if (key == "lm_head_scale") {
      options.lm_head_scale = std::stod(value);
    } else if (key == "perturb") {
      options.perturb = std::stod(value);
    } else if (key == "refill_table") {
      options.refill_table = std::stoi(value);
    } else if (kFloatKeys.count(key) != 0) {
      options.overrides[key] = std::stod(value);
    } else if (kIntKeys.count(key) != 0) {
      options.overrides[key] = static_cast<int64_t>(std::stoll(value));
    } else if (kBoolKeys.count(key) != 0) {
      options.overrides[key] = value == "true";
    } else if (key == "reward_funcs") {
      options.overrides[key] = split_list(value);
    } else if (key == "reward_weights") {
      std::vector<double> weights;
      for (const std::string& item : split_list(value)) weights.push_back(std::stod(item));
      options.overrides[key] = weights;
    } else {
      options.overrides[key] = value;
    }
  }
  return options;
}

// This rank's part of global batch `step` when batch s is the table's prompts 4s … 4s + 3.
std::vector<const sdk::Example*> ordered_batch_slice(const std::vector<sdk::Example>& examples, int64_t step,
                                                     const dist::LaunchEnv& launch) {
  const data::RankSlice slice = data::rank_slice(4, launch.rank, launch.world_size);
  std::vector<const sdk::Example*> batch;
  for (int64_t i = slice.begin; i < slice.end; ++i) batch.push_back(&examples.at(4 * step + i));
  return batch;
}

// One GRPO step on the injected rollouts of grpo_test_support.h (with
// perturb=F: the second update of num_iterations = 2, after moving the
// weights); rank 0 writes the summed gradient (the model of seed 31) to
// GRADIENT_FILE. Every rank reports its rollouts: prompt, generation, trained.
int run_grpo(const dist::LaunchEnv& launch, int argc, char** argv) {
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(60));
  const auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 31);
  const tokenizer::ByteTokenizer tokenizer;
  const GrpoWorkerOptions options = grpo_options(argc, argv);
  const sdk::ConfigValues values = grpo_test::grpo_values(options.overrides);
  if (options.lm_head_scale != 1.0) grpo_test::sharpen_lm_head(*policy, options.lm_head_scale);
  plugin::HostContext host(*policy, tokenizer, values, *communicator, sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""});
  const std::vector<grpo_test::Prompt> prompts = options.refill_table >= 0
                                                     ? grpo_test::refill_epoch_prompts(options.refill_table == 1)
                                                     : grpo_test::global_batch_prompts();
  grpo_test::FixedRolloutEngine engine(prompts);
  grpo_test::InjectedContext context(host, engine);
  grpo::GrpoModule module;
  module.setup(context);

  const std::vector<sdk::Example> examples = grpo_test::to_examples(prompts);
  std::vector<const sdk::Example*> rank_examples;
  if (options.refill_table >= 0) {
    rank_examples = ordered_batch_slice(examples, 0, launch);
    host.set_example_source([&](int64_t step) { return ordered_batch_slice(examples, step, launch); });
  } else {
    const data::GlobalBatchSampler sampler(4, 4, 0);
    for (const int64_t index : data::rank_example_indices(sampler, 0, launch.rank, launch.world_size)) {
      rank_examples.push_back(&examples[index]);
    }
  }
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : policy->named_parameters()) parameters.push_back(parameter);
  metrics::MetricReducer first(train::step_metric_specs(module));
  metrics::MetricReducer second(train::step_metric_specs(module));
  dist::GradientSynchronizer grad_sync(parameters, *communicator, 1 << 20);
  const sdk::MicrobatchPlan plan{std::atoll(argv[3]), 0};
  const train::StepParts parts{module, "grpo", context, parameters, *communicator, grad_sync, nullptr};
  train::accumulate_gradients(parts, rank_examples, plan, first);
  if (options.perturb != 0.0) {
    grpo_test::perturb_parameters(*policy, options.perturb);
    host.set_step(1, 0);
    train::accumulate_gradients(parts, rank_examples, plan, second);
  }
  const auto reduced = (options.perturb != 0.0 ? second : first).reduce(*communicator);
  if (launch.rank == 0) {
    std::vector<std::pair<std::string, at::Tensor>> grads;
    for (const auto& [name, parameter] : policy->named_parameters()) grads.emplace_back(name, parameter.grad().clone());
    model::write_safetensors(argv[4], grads);
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const grpo::ScoredCompletion& completion : module.completions()) {
    rows.push_back({completion.prompt_index, completion.generation_index, completion.trained});
  }
  nlohmann::json result{{"rank", launch.rank}, {"loss", reduced.at("core/loss")}, {"rows", rows}};
  if (reduced.count("groups/kept") != 0) {
    result["groups_generated"] = reduced.at("groups/generated");
    result["groups_kept"] = reduced.at("groups/kept");
  }
  std::cout << "RESULT " << result.dump() << std::endl;
  return 0;
}

// The rollouts the GRPO plugin samples with the real engine (no injection)
// for this rank's prompts of the injected table's global batch, at seed SEED,
// step 3 and TEMPERATURE: one RESULT line with every completion's token ids,
// keyed by prompt and generation index. Threads as `ptrain train` sets them
// (trainer.cpp: the cores shared by the ranks of the node), so 1 and 2 ranks
// decode with different thread counts as well as different batches.
int run_rollouts(const dist::LaunchEnv& launch, char** argv) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(std::max(1, static_cast<int>(cores) / std::max(1, launch.local_world_size)));
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(60));
  const auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 31);
  const tokenizer::ByteTokenizer tokenizer;
  const std::map<std::string, sdk::ConfigValue> overrides{{"temperature", std::stod(argv[3])},
                                                          {"max_completion_length", int64_t{16}}};
  const sdk::ConfigValues values = grpo_test::grpo_values(overrides);
  plugin::HostContext host(*policy, tokenizer, values, *communicator,
                           sdk::RunInfo{std::strtoull(argv[2], nullptr, 10), grpo_test::kMaxLength, 3, 0, ""});
  grpo::GrpoModule module;
  module.setup(host);

  const std::vector<sdk::Example> examples = grpo_test::to_examples(grpo_test::global_batch_prompts());
  const auto size = static_cast<int64_t>(examples.size());
  const data::GlobalBatchSampler sampler(size, size, 0);
  std::vector<const sdk::Example*> rank_examples;
  for (const int64_t index : data::rank_example_indices(sampler, 3, launch.rank, launch.world_size)) {
    rank_examples.push_back(&examples[index]);
  }
  module.prepare(host, rank_examples, sdk::MicrobatchPlan{4, 0});
  const std::vector<grpo::ScoredCompletion>& completions = module.completions();
  const auto g = static_cast<size_t>(module.config().num_generations);
  if (completions.size() != rank_examples.size() * g) throw sdk::PluginError("unexpected number of completions");
  nlohmann::json rollouts = nlohmann::json::array();
  for (size_t i = 0; i < completions.size(); ++i) {
    rollouts.push_back(
        {{"prompt", rank_examples[i / g]->index}, {"generation", i % g}, {"ids", completions[i].completion_ids}});
  }
  std::cout << "RESULT " << nlohmann::json{{"rank", launch.rank}, {"rollouts", rollouts}}.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: dist_worker env|metrics|data|die|hang|mismatch ...\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    const dist::LaunchEnv launch = dist::read_launch_env();
    if (mode == "env") return run_env(launch, argc, argv);
    if (mode == "metrics") return run_metrics(launch);
    if (mode == "data" && argc == 6) return run_data(launch, argv);
    if ((mode == "die" || mode == "hang" || mode == "mismatch" || mode == "loop") && argc == 4) {
      return run_fault(launch, mode, argv);
    }
    if (mode == "grpo" && argc >= 5) return run_grpo(launch, argc, argv);
    if (mode == "rollouts" && argc == 4) return run_rollouts(launch, argv);
    if (mode == "layer_shards" && argc == 2) return dist_test::run_layer_shards(launch);
    if (mode == "sharded_layers" && argc == 2) return dist_test::run_sharded_layers(launch);
    if (mode == "full_adamw" && argc == 3) return dist_test::run_full_adamw(launch, argv[2]);
    if (mode == "layer_divergence" && argc == 2) return dist_test::run_layer_divergence(launch);
    if (mode == "layer_meeting" && argc == 2) return dist_test::run_layer_meeting(launch);
    if (mode == "rank_weights" && argc == 3) return dist_test::run_rank_weights(launch, argv[2]);
    if (mode == "all_gather" && argc == 2) return run_all_gather(launch);
    std::cerr << "dist_worker: bad arguments for mode '" << mode << "'\n";
    return 2;
  } catch (const std::exception& error) {
    const std::string text = error.what();
    std::cerr << "dist_worker: error: " << text.substr(0, text.find('\n')) << "\n";
    return 1;
  }
}
