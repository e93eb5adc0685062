// Data parallel over real processes: `ptrain launch` starts the ranks, which
// rendezvous over Gloo on 127.0.0.1 at a port picked at run time.
#include "catch.h"

#include "dist/dist_test_support.h"
#include "dpo_test_support.h"
#include "grpo_test_support.h"
#include "support/test_util.h"

#include "core/checkpoint/remove_tree.h"
#include "core/data/global_batch_sampler.h"
#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"
#include "core/train/run_setup.h"
#include "support/run_command.h"
#include "support/sft_reference.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace ptrain;
using testing::CommandResult;
using testing::run_ptrain;

using dist_test::launch_worker;
using dist_test::process_alive;
using dist_test::read_pids;
using dist_test::results_by_rank;

TEST_CASE("launch sets torchrun's variables, prefixes output with the rank and names a failed rank", "[dist]") {
  const CommandResult ok = run_ptrain(launch_worker(3, "env"));
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    CHECK_THAT(ok.output, Catch::Contains(prefix + "RANK=" + std::to_string(rank)));
    CHECK_THAT(ok.output, Catch::Contains(prefix + "LOCAL_RANK=" + std::to_string(rank)));
    CHECK_THAT(ok.output, Catch::Contains(prefix + "WORLD_SIZE=3"));
    CHECK_THAT(ok.output, Catch::Contains(prefix + "LOCAL_WORLD_SIZE=3"));
    CHECK_THAT(ok.output, Catch::Contains(prefix + "MASTER_ADDR=127.0.0.1"));
    CHECK_THAT(ok.output, Catch::Contains(prefix + "a line on stderr"));
  }
  CHECK_THAT(ok.output, Catch::Contains("[rank 2] MASTER_PORT="));

  const CommandResult fixed_port =
      run_ptrain("launch --nproc 2 --master-port 29123 -- " + std::string(PTRAIN_DIST_WORKER) + " env");
  CHECK_THAT(fixed_port.output, Catch::Contains("[rank 1] MASTER_PORT=29123"));

  const CommandResult failed = run_ptrain(launch_worker(3, "env 2 7"));
  CHECK(failed.exit_code == 7);
  CHECK_THAT(failed.output, Catch::Contains("ptrain launch: rank 2 failed (exit code 7)"));

  const CommandResult usage = run_ptrain("launch -- train");
  CHECK(usage.exit_code == 2);
  const CommandResult no_command = run_ptrain("launch --nproc 2");
  CHECK(no_command.exit_code == 2);
  CHECK_THAT(no_command.output, Catch::Contains("give the command after --"));
}

TEST_CASE("weighted means over ranks with very different token counts are the global ones", "[dist]") {
  for (const int world : {2, 3}) {
    const CommandResult result = run_ptrain(launch_worker(world, "metrics"));
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    dist_test::check_global_metrics(results_by_rank(result.output), world);
  }
}

TEST_CASE("a plugin's all_gather concatenates uneven ranks in rank order, and refuses other row shapes", "[dist]") {
  for (const int world : {2, 3}) {
    const CommandResult result = run_ptrain(launch_worker(world, "all_gather"));
    INFO("world size " << world << "\n" << result.output);
    REQUIRE(result.exit_code == 0);
    const auto by_rank = results_by_rank(result.output);
    REQUIRE(static_cast<int>(by_rank.size()) == world);
    // Rank r gave rows (r, k + 0.5) for k < r: 0 + 1 + ... + (R − 1) rows in all.
    std::vector<double> expected;
    std::vector<int64_t> scalars;
    for (int rank = 0; rank < world; ++rank) {
      for (int k = 0; k < rank; ++k) expected.insert(expected.end(), {static_cast<double>(rank), k + 0.5});
      scalars.push_back(rank);
    }
    for (const auto& [rank, values] : by_rank) {
      INFO("rank " << rank);
      CHECK(values["shape"] == nlohmann::json::array({world * (world - 1) / 2, 2}));
      CHECK(values["rows"].get<std::vector<double>>() == expected);
      CHECK(values["scalars"].get<std::vector<int64_t>>() == scalars);
      CHECK_THAT(values["refused"].get<std::string>(),
                 Catch::Contains("all_gather: the ranks' tensors differ beyond their first dimension") &&
                     Catch::Contains("rank 1: 2 elements per row"));
    }
  }
}

TEST_CASE("the ranks of a step together take exactly the world-size-1 global batch", "[dist]") {
  const data::GlobalBatchSampler sampler(50, 12, 3);
  for (const int world : {1, 2, 3, 4, 5}) {
    const CommandResult result = run_ptrain(launch_worker(world, "data 50 12 3 6"));
    INFO("world size " << world << "\n" << result.output);
    REQUIRE(result.exit_code == 0);
    const auto by_rank = results_by_rank(result.output);
    REQUIRE(static_cast<int>(by_rank.size()) == world);
    for (int64_t step = 0; step < 6; ++step) {
      std::vector<int64_t> joined;
      for (const auto& [rank, values] : by_rank) {
        for (const auto& index : values["steps"][step]) joined.push_back(index.get<int64_t>());
      }
      CHECK(joined == sampler.global_batch(step));
    }
  }
}

TEST_CASE("a rank that dies or hangs ends the job with an error naming it, within the timeout", "[dist]") {
  for (const std::string mode : {"die", "hang", "mismatch"}) {
    DYNAMIC_SECTION("worker " << mode) {
      const fs::path pid_dir = testing::fresh_test_dir("fault_" + mode);
      constexpr int kTimeoutS = 4;
      const CommandResult result =
          run_ptrain(launch_worker(3, mode + " " + std::to_string(kTimeoutS) + " " + pid_dir.string()));
      INFO(result.output);
      CHECK(result.exit_code != 0);
      // The margin covers starting three processes that load LibTorch on a busy 2-core machine;
      // without the timeout a hung rank would block until ctest kills the test.
      CHECK(result.seconds < kTimeoutS + 20);
      if (mode == "die") {
        CHECK_THAT(result.output, Catch::Contains("ptrain launch: rank 1 failed (exit code 3)"));
      } else if (mode == "mismatch") {
        // Gloo does not compare shapes across ranks: a rank receiving more bytes
        // than it posted aborts in Gloo's I/O thread (uncatchable), which the
        // launcher reports; otherwise the wait times out. Either way no hang.
        CHECK_THAT(result.output,
                   Catch::Contains("op.preamble.length <= op.nbytes") || Catch::Contains("all_reduce(sum) failed"));
        CHECK_THAT(result.output, Catch::Contains("ptrain launch: rank"));
      } else {
        // Rank 0 or 2 times out first, names the operation it waited in and
        // the rank that never reported a failure of its own.
        CHECK_THAT(result.output, Catch::Contains("all_reduce(sum) failed"));
        CHECK_THAT(result.output, Catch::Contains("no word from rank 1 within 2 s of this failure: it hung or died"));
      }
      CHECK_THAT(result.output, Catch::Contains("stopping the other workers"));
      CHECK_FALSE(Catch::Contains("unexpectedly finished").match(result.output));
      const std::vector<pid_t> pids = read_pids(pid_dir);
      CHECK(pids.size() == 3);
      for (const pid_t pid : pids) CHECK_FALSE(process_alive(pid));
    }
  }
}

namespace {

// Uneven lengths; one example loses every trainable token to truncation.
std::vector<testing::PromptCompletion> invariance_dataset() {
  std::vector<testing::PromptCompletion> pairs;
  for (int i = 0; i < 16; ++i) {
    const std::string prompt = i == 5 ? std::string(40, 'p') : std::string(1 + (i * 7) % 13, 'a' + i % 26) + "=";
    pairs.push_back({prompt, std::string(1 + (i * 5) % 11, '0' + i % 10)});
  }
  return pairs;
}

constexpr int64_t kMaxLength = 24;
constexpr int64_t kGlobalSize = 16;
constexpr uint64_t kSeed = 5;

fs::path write_invariance_config(const fs::path& dir) {
  std::ofstream data(dir / "train.jsonl");
  for (const auto& pair : invariance_dataset()) {
    data << nlohmann::json{{"prompt", pair.prompt}, {"completion", pair.completion}}.dump() << "\n";
  }
  const fs::path path = dir / "invariance.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = " << kSeed << "\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 264\nhidden_size = 32\nintermediate_size = 48\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "tie_word_embeddings = false\nattention_bias = true\n"
                      << "[data]\ntrain = \"" << (dir / "train.jsonl").string() << "\"\nmax_length = " << kMaxLength
                      << "\n[batch]\nglobal_size = " << kGlobalSize << "\n"
                      << "[optim]\nname = \"sgd\"\nlr = 1.0\nweight_decay = 0.0\nclip_grad_norm = 0.0\n"
                      << "[schedule]\nname = \"constant\"\n"
                      << "[train]\nmax_steps = 1\n"
                      << "[distributed]\nbucket_mb = 1\n";
  return path;
}

}  // namespace

TEST_CASE("one step gives the full-batch gradient for world sizes 1, 2, 4 × accumulation 1, 2, 4", "[dist]") {
  const fs::path dir = testing::fresh_test_dir("world_invariance");
  const fs::path config_path = write_invariance_config(dir);

  // The examples of step 0, as the sampler picks them for any world size.
  const std::vector<testing::PromptCompletion> dataset = invariance_dataset();
  std::vector<testing::PromptCompletion> global_batch;
  for (const int64_t index : data::GlobalBatchSampler(kGlobalSize, kGlobalSize, kSeed).global_batch(0)) {
    global_batch.push_back(dataset[index]);
  }
  // The [model] the ranks' config.toml gives (above): the tiny Qwen2 layout at these sizes.
  model::ModelConfig architecture = testing::tiny_model_config();
  architecture.vocab_size = 264;
  architecture.intermediate_size = 48;
  architecture.max_position_embeddings = 32;

  for (const std::string& mode : sdk::loss_aggregation_names()) {
    const auto initial = model::CausalLm::init_random(architecture, kSeed);
    std::vector<at::Tensor> initial_parameters;
    for (const auto& [name, parameter] : initial->named_parameters())
      initial_parameters.push_back(parameter.detach().clone());
    const double norm_constant = static_cast<double>(kMaxLength);  // the SFT default, data.max_length
    const std::vector<at::Tensor> expected = testing::reference_sft_gradients(
        *initial, global_batch, {sdk::parse_loss_aggregation(mode), norm_constant}, kMaxLength);

    for (const int world : {1, 2, 4}) {
      for (const int accumulation : {1, 2, 4}) {
        // The sharded updates (distributed.sharding, tests/dist/test_sharding.cpp)
        // too: "optimizer" on one aggregation mode, "full" on every one, each
        // must give the same gradient.
        const std::string sharding = world == 1                                   ? "none"
                                     : accumulation == 4                          ? "full"
                                     : mode == "token_mean" && accumulation == 2 ? "optimizer"
                                                                                  : "none";
        const int64_t micro_size = kGlobalSize / world / accumulation;
        const fs::path run_dir = dir / (mode + "_w" + std::to_string(world) + "_a" + std::to_string(accumulation));
        // One rank that builds its process group anyway (PTRAIN_TEST_PROCESS_GROUP,
        // how scripts/gpu-proof.sh runs NCCL on one GPU): its collectives leave
        // the gradient as it is.
        const bool process_group = world == 1 && accumulation == 2;
        const CommandResult result = testing::run_command(
            std::string(process_group ? "PTRAIN_TEST_PROCESS_GROUP=1 " : "") + PTRAIN_EXE +
            " launch --nproc " + std::to_string(world) + " -- train -c " + config_path.string() +
                       " --set module.loss_agg=\"" + mode + "\" --set batch.micro_size=" + std::to_string(micro_size) +
                       " --set output_dir=\"" + run_dir.string() + "\"" +
                       " --set distributed.sharding=\"" + sharding + "\"");
        INFO("loss_agg " << mode << ", world " << world << ", accumulation " << accumulation << ", sharding " << sharding
                         << "\n"
                         << result.output);
        REQUIRE(result.exit_code == 0);

        // SGD with lr 1: the update is the gradient.
        const auto trained = model::CausalLm::load_hf_dir(run_dir / "final");
        std::vector<at::Tensor> gradient;
        const auto trained_parameters = trained->named_parameters();
        for (size_t i = 0; i < trained_parameters.size(); ++i) {
          gradient.push_back(initial_parameters[i] - trained_parameters[i].second.detach());
        }
        const double error = testing::relative_error(gradient, expected);
        INFO("relative gradient error " << error);
        CHECK(error <= 1e-5);
        // Time in collectives: none without a process group.
        const double comm_seconds = testing::read_metrics_jsonl(run_dir / "metrics.jsonl").back().at("comm_s");
        CHECK((comm_seconds > 0.0) == (world > 1 || process_group));
        ptrain::checkpoint::remove_tree(run_dir);
      }
    }
  }
}

TEST_CASE("DPO: one step gives the full-batch gradient on world sizes 1 and 2", "[dist][dpo]") {
  const fs::path dir = testing::fresh_test_dir("dpo_world_invariance");
  constexpr uint64_t kPolicySeed = 5;
  const fs::path reference_dir = dir / "reference";
  model::CausalLm::init_random(testing::tiny_model_config(), 8)->save_hf_dir(reference_dir);
  const auto reference = model::CausalLm::load_hf_dir(reference_dir);

  // All eight pairs form the global batch of step 0, in the sampler's order.
  const std::vector<dpo_test::PreferencePair> dataset = dpo_test::global_batch_pairs();
  std::ofstream data(dir / "pairs.jsonl");
  for (const auto& pair : dataset) {
    data << nlohmann::json{{"prompt", pair.prompt}, {"chosen", pair.chosen}, {"rejected", pair.rejected}}.dump()
         << "\n";
  }
  data.close();
  std::vector<dpo_test::PreferencePair> global_batch;
  for (const int64_t index : data::GlobalBatchSampler(8, 8, kPolicySeed).global_batch(0)) {
    global_batch.push_back(dataset[index]);
  }
  const model::ModelConfig tiny = testing::tiny_model_config();
  const fs::path config_path = dir / "dpo.toml";
  std::ofstream(config_path) << "plugin = \"dpo\"\nseed = " << kPolicySeed << "\n"
                             << "[model]\nvocab_size = " << tiny.vocab_size << "\nhidden_size = " << tiny.hidden_size
                             << "\nintermediate_size = " << tiny.intermediate_size
                             << "\nnum_layers = " << tiny.num_layers << "\nnum_heads = " << tiny.num_heads
                             << "\nnum_kv_heads = " << tiny.num_kv_heads
                             << "\nmax_position_embeddings = " << tiny.max_position_embeddings
                             << "\ntie_word_embeddings = false\nattention_bias = true\n"
                             << "[data]\ntrain = \"" << (dir / "pairs.jsonl").string()
                             << "\"\nmax_length = " << dpo_test::kMaxLength << "\n"
                             << "[batch]\nglobal_size = 8\n"
                             << "[optim]\nname = \"sgd\"\nlr = 1.0\nweight_decay = 0.0\nclip_grad_norm = 0.0\n"
                             << "[schedule]\nname = \"constant\"\n[train]\nmax_steps = 1\n"
                             << "[module]\ngamma = 0.5\nreference_model = \"" << reference_dir.string() << "\"\n";

  struct Case {
    const char* loss;
    dpo_test::ReferenceLoss reference_loss;
    double beta;
    bool uses_reference;
  };
  for (const Case& c : {Case{"sigmoid", dpo_test::ReferenceLoss::kSigmoid, 0.1, true},
                        Case{"ipo", dpo_test::ReferenceLoss::kIpo, 0.1, true},
                        Case{"simpo", dpo_test::ReferenceLoss::kSimpo, 2.0, false}}) {
    const auto initial = model::CausalLm::init_random(tiny, kPolicySeed);
    std::vector<at::Tensor> initial_parameters;
    for (const auto& [name, parameter] : initial->named_parameters()) {
      initial_parameters.push_back(parameter.detach().clone());
    }
    dpo_test::ReferenceSpec spec;
    spec.loss = c.reference_loss;
    spec.beta = c.beta;
    spec.gamma = 0.5;
    dpo_test::reference_step_loss(*initial, c.uses_reference ? reference.get() : nullptr, global_batch, spec)
        .backward();
    std::vector<at::Tensor> expected;
    for (const auto& [name, parameter] : initial->named_parameters()) expected.push_back(parameter.grad().clone());

    // Micro sizes 8, 4, 2 and 1 pairs: world 2 with accumulation 1, 2 and 4;
    // then packed rows (accumulation 0 here) under token budgets on 1 and 2 ranks.
    struct Split {
      int world;
      int accumulation;
      int64_t packed_tokens;
    };
    for (const Split& split : {Split{1, 1, 0}, Split{2, 1, 0}, Split{2, 2, 0}, Split{2, 4, 0},
                               Split{1, 0, 3 * dpo_test::kMaxLength}, Split{2, 0, 2 * dpo_test::kMaxLength}}) {
      const std::string layout =
          split.packed_tokens > 0
              ? " --set batch.packing=true --set batch.micro_tokens=" + std::to_string(split.packed_tokens)
              : " --set batch.micro_size=" + std::to_string(8 / split.world / split.accumulation);
      const fs::path run_dir = dir / (std::string(c.loss) + "_w" + std::to_string(split.world) + "_a" +
                                      std::to_string(split.accumulation) + "_p" + std::to_string(split.packed_tokens));
      const CommandResult result =
          run_ptrain("launch --nproc " + std::to_string(split.world) + " -- train -c " + config_path.string() +
                     " --set module.loss=\"" + c.loss + "\" --set module.beta=" + std::to_string(c.beta) + layout +
                     " --set output_dir=\"" + run_dir.string() + "\"");
      INFO("loss " << c.loss << ", world " << split.world << ", accumulation " << split.accumulation
                   << ", packed tokens " << split.packed_tokens << "\n"
                   << result.output);
      REQUIRE(result.exit_code == 0);
      const auto trained = model::CausalLm::load_hf_dir(run_dir / "final");
      const auto trained_parameters = trained->named_parameters();
      std::vector<at::Tensor> gradient;
      for (size_t i = 0; i < trained_parameters.size(); ++i) {
        gradient.push_back(initial_parameters[i] - trained_parameters[i].second.detach());
      }
      const double error = testing::relative_error(gradient, expected);
      INFO("relative gradient error " << error);
      CHECK(error <= 1e-5);
    }
  }
}

namespace {

// 16 good examples with two bad lines (5: invalid JSON, 12: a completion that is not a string)
// skipped by data.on_error = "skip"; checkpoints every step.
fs::path write_fault_config(const fs::path& dir, int max_steps) {
  std::ofstream data(dir / "train.jsonl");
  for (int i = 0; i < 16; ++i) {
    data << nlohmann::json{{"prompt", std::to_string(i) + "*2="}, {"completion", std::to_string(2 * i)}}.dump() << "\n";
    if (i == 3) data << "{\"prompt\": \"truncated\n";
    if (i == 9) data << "{\"prompt\": \"x\", \"completion\": null}\n";
  }
  const fs::path config = dir / "faults.toml";
  std::ofstream(config) << "plugin = \"sft\"\nseed = 2\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                        << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 48\nnum_layers = 1\n"
                        << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                        << "[data]\ntrain = \"" << (dir / "train.jsonl").string() << "\"\nmax_length = 16\n"
                        << "on_error = \"skip\"\n"
                        << "[batch]\nglobal_size = 8\n"
                        << "[train]\nmax_steps = " << max_steps << "\n"
                        << "[checkpoint]\nevery_steps = 1\nkeep_last = 5\n";
  return config;
}

// `ptrain launch --nproc 2 -- train` with one failpoint armed (core/log/failpoint.h).
CommandResult train_two_ranks_with(const char* hook, const char* value, const fs::path& config) {
  ::setenv(hook, value, 1);
  const CommandResult result = run_ptrain("launch --nproc 2 -- train -c " + config.string() + " 2>&1");
  ::unsetenv(hook);
  return result;
}

}  // namespace

TEST_CASE("a NaN on rank 1 only skips the update on both ranks, and both skip the same bad lines", "[dist][reliability]") {
  const fs::path dir = testing::fresh_test_dir("dist_nan");
  const CommandResult result = train_two_ranks_with("PTRAIN_TEST_NAN_AT", "2:1", write_fault_config(dir, 3));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  // Each rank reads the whole file and reports the same skipped lines.
  for (const std::string rank : {"[rank 0] ", "[rank 1] "}) {
    std::set<std::string> reported;
    std::istringstream lines(result.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(rank, 0) != 0) continue;
      for (const char* part : {"skipped 2 bad examples of 18", "train.jsonl:5: invalid JSON",
                               "train.jsonl:12: field 'completion': expected a string"}) {
        if (line.find(part) != std::string::npos) reported.insert(part);
      }
    }
    INFO(rank);
    CHECK(reported.size() == 3);
  }
  const auto metrics = testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(metrics.size() == 3);
  CHECK(metrics[1]["nonfinite_steps"] == 1);
  // Rank 0 saw finite numbers at step 2, yet did not step: its checkpoint is unchanged.
  const fs::path checkpoints = dir / "run" / "checkpoints";
  CHECK(testing::same_safetensors(checkpoints / "step_1" / "model.safetensors",
                                  checkpoints / "step_2" / "model.safetensors"));
  CHECK_FALSE(testing::same_safetensors(checkpoints / "step_2" / "model.safetensors",
                                        checkpoints / "step_3" / "model.safetensors"));
}

TEST_CASE("a stop requested on rank 1 only stops both ranks after the same step, with a checkpoint",
          "[dist][reliability]") {
  const fs::path dir = testing::fresh_test_dir("dist_stop");
  const CommandResult result = train_two_ranks_with("PTRAIN_TEST_STOP_AT", "2:1", write_fault_config(dir, 6));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("stopped on request after step 2"));
  CHECK(testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl").size() == 2);
  std::ifstream latest(dir / "run" / "checkpoints" / "latest");
  std::string name;
  latest >> name;
  CHECK(name == "step_2");
  CHECK_FALSE(fs::exists(dir / "run" / "final"));
}

TEST_CASE("GRPO: one step on fixed rollouts gives the full-batch gradient on world sizes 1 and 2", "[dist][grpo]") {
  const fs::path dir = testing::fresh_test_dir("grpo_world_invariance");
  // A KL reference that differs from the policy, for the beta > 0 case.
  const fs::path reference_dir = dir / "reference";
  model::CausalLm::init_random(testing::tiny_model_config(), 33)->save_hf_dir(reference_dir);
  const auto reference = model::CausalLm::load_hf_dir(reference_dir);

  struct Case {
    std::string loss_type;
    std::vector<std::string> options;  // the worker's [module] overrides, KEY=VALUE
    grpo_test::ReferenceSpec spec;
    double lm_head_scale = 1.0;
    double perturb = 0.0;  // > 0: the second update of num_iterations = 2, after perturb_parameters
  };
  std::vector<Case> cases;
  for (const std::string loss_type : {"dapo", "bnpo", "grpo", "dr_grpo"}) {
    grpo_test::ReferenceSpec spec;
    spec.loss_type = loss_type;
    cases.push_back({loss_type, {}, spec});
  }
  {
    grpo_test::ReferenceSpec spec;
    spec.beta = 0.1;
    spec.kl_estimator = "k2";
    cases.push_back({"dapo", {"beta=0.1", "kl_estimator=k2", "reference_model=" + reference_dir.string()}, spec});
  }
  {
    // The batch std is all-reduced over the ranks' rewards.
    grpo_test::ReferenceSpec spec;
    spec.loss_type = "grpo";
    spec.scale_rewards = "batch";
    cases.push_back({"grpo", {"scale_rewards=batch"}, spec});
  }
  {
    // normalize_then_sum: the sum of group-normalised rewards is normalised over
    // both ranks' completions (its moments ride on the same all-reduce).
    grpo_test::ReferenceSpec spec;
    spec.normalize_then_sum = true;
    spec.function_rewards = {{{1, 0, 0}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}},   // accuracy
                             {{1, 1, 1}, {1, 1, 1}, {1, 0, 0}, {0, 0, 0}}};  // format: ^-?[0-9]+$, ended by <eos>
    spec.reward_weights = {1.0, 0.5};
    cases.push_back({"dapo",
                     {"reward_aggregation=normalize_then_sum", "reward_funcs=accuracy,format", "reward_weights=1,0.5"},
                     spec});
  }
  {
    // The entropy quantile is taken over every rank's tokens (37; 0.55·36 is not an integer).
    grpo_test::ReferenceSpec spec;
    spec.top_entropy_quantile = 0.55;
    cases.push_back({"dapo", {"top_entropy_quantile=0.55", "lm_head_scale=40"}, spec, 40.0});
  }
  // CISPO and SAPO for each aggregation, on the first update (w = 1) and on
  // the second of num_iterations = 2 (weights moved, w ≠ 1).
  for (const std::string policy_loss : {"cispo", "sapo"}) {
    for (const std::string loss_type : {"dapo", "grpo", "dr_grpo"}) {
      for (const double perturb : {0.0, 0.02}) {
        grpo_test::ReferenceSpec spec;
        spec.policy_loss = policy_loss;
        spec.loss_type = loss_type;
        spec.cispo_epsilon_low = 0.1;
        spec.cispo_epsilon_high = 0.1;
        spec.sapo_tau_neg = 3.0;
        std::vector<std::string> options{"policy_loss=" + policy_loss,
                                         policy_loss == "cispo" ? "cispo_epsilon_low=0.1" : "sapo_tau_neg=3"};
        if (policy_loss == "cispo") options.push_back("cispo_epsilon_high=0.1");
        if (perturb > 0) {
          options.push_back("num_iterations=2");
          options.push_back("perturb=0.02");
        }
        cases.push_back({loss_type, options, spec, 1.0, perturb});
      }
    }
  }

  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& test = cases[c];
    const auto initial = model::CausalLm::init_random(testing::tiny_model_config(), 31);
    if (test.lm_head_scale != 1.0) grpo_test::sharpen_lm_head(*initial, test.lm_head_scale);
    const auto generating = initial->frozen_copy();  // π_old of the second update
    if (test.perturb > 0) grpo_test::perturb_parameters(*initial, test.perturb);
    grpo_test::reference_step_loss(*initial, test.perturb > 0 ? generating.get() : nullptr, reference.get(),
                                   grpo_test::global_batch_prompts(), test.spec)
        .backward();
    std::vector<at::Tensor> expected;
    for (const auto& [name, parameter] : initial->named_parameters()) expected.push_back(parameter.grad().clone());
    std::string options;
    for (const std::string& option : test.options) options += " " + option;

    // 12 completions; on 2 ranks 6 each, so micro sizes 4 and 1 split a rank unevenly.
    for (const auto& [world, micro_size] : std::vector<std::pair<int, int>>{{1, 12}, {2, 6}, {2, 4}, {2, 2}, {2, 1}}) {
      const fs::path gradient_file = dir / ("case" + std::to_string(c) + "_w" + std::to_string(world) + "_m" +
                                            std::to_string(micro_size) + ".safetensors");
      const CommandResult result = run_ptrain(launch_worker(
          world, "grpo " + test.loss_type + " " + std::to_string(micro_size) + " " + gradient_file.string() + options));
      INFO("loss_type " << test.loss_type << options << ", world " << world << ", micro_size " << micro_size << "\n"
                        << result.output);
      REQUIRE(result.exit_code == 0);
      std::map<std::string, at::Tensor> by_name;
      for (const auto& [name, tensor] : model::read_safetensors(gradient_file)) by_name[name] = tensor;
      std::vector<at::Tensor> gradient;
      for (const auto& [name, parameter] : initial->named_parameters()) gradient.push_back(by_name.at(name));
      const double error = testing::relative_error(gradient, expected);
      INFO("relative gradient error " << error);
      CHECK(error <= 1e-5);
    }
  }
}

TEST_CASE("GRPO refill keeps the same groups and gives the same gradient on 1 and 2 ranks", "[dist][grpo]") {
  // Step 0 is prompts 0-3 (1 is flat), step 1 prompts 4-7 (5 and 6 mixed):
  // the refill keeps 5, the first informative group in the global order,
  // although on 2 ranks rank 0 holds 4-5 and rank 1 holds 6-7, each with an
  // informative group of its own. With only flat groups later, it stops at
  // max_generation_rounds.
  const fs::path dir = testing::fresh_test_dir("grpo_refill");
  for (const bool informative : {true, false}) {
    const std::vector<grpo_test::Prompt> table = grpo_test::refill_epoch_prompts(informative);
    const std::vector<size_t> kept = informative ? std::vector<size_t>{0, 1, 2, 3, 5} : std::vector<size_t>{0, 1, 2, 3};
    std::vector<grpo_test::Prompt> kept_prompts;
    for (const size_t index : kept) kept_prompts.push_back(table[index]);
    const auto initial = model::CausalLm::init_random(testing::tiny_model_config(), 31);
    grpo_test::ReferenceSpec spec;
    spec.filter_zero_std = true;
    spec.scale_rewards = "batch";  // the batch std is over the kept groups of every rank
    grpo_test::reference_step_loss(*initial, nullptr, nullptr, kept_prompts, spec).backward();
    std::vector<at::Tensor> expected;
    for (const auto& [name, parameter] : initial->named_parameters()) expected.push_back(parameter.grad().clone());

    for (const auto& [world, micro_size] : std::vector<std::pair<int, int>>{{1, 15}, {2, 4}, {2, 1}}) {
      const fs::path gradient_file = dir / ("refill" + std::to_string(informative) + "_w" + std::to_string(world) +
                                            "_m" + std::to_string(micro_size) + ".safetensors");
      const CommandResult result = run_ptrain(
          launch_worker(world, "grpo dapo " + std::to_string(micro_size) + " " + gradient_file.string() +
                                   " refill_table=" + std::to_string(informative ? 1 : 0) +
                                   " filter_zero_std_groups=true max_generation_rounds=3 scale_rewards=batch"));
      INFO("informative " << informative << ", world " << world << ", micro_size " << micro_size << "\n"
                          << result.output);
      REQUIRE(result.exit_code == 0);
      std::set<std::pair<int64_t, int64_t>> rows;
      for (const auto& [rank, values] : results_by_rank(result.output)) {
        CHECK(values["groups_generated"].get<double>() == (informative ? 8.0 : 12.0));
        CHECK(values["groups_kept"].get<double>() == (informative ? 4.0 : 3.0));
        for (const auto& row : values["rows"]) {
          CHECK(rows.insert({row[0].get<int64_t>(), row[1].get<int64_t>()}).second);
          CHECK(row[2].get<bool>() == (row[0].get<int64_t>() != 1));  // only the flat group of step 0 is untrained
        }
      }
      std::set<std::pair<int64_t, int64_t>> expected_rows;
      for (const size_t index : kept) {
        const int64_t round = index < 4 ? 0 : 1;
        for (int64_t k = 0; k < 3; ++k) expected_rows.insert({static_cast<int64_t>(index), round * 3 + k});
      }
      CHECK(rows == expected_rows);
      std::map<std::string, at::Tensor> by_name;
      for (const auto& [name, tensor] : model::read_safetensors(gradient_file)) by_name[name] = tensor;
      std::vector<at::Tensor> gradient;
      for (const auto& [name, parameter] : initial->named_parameters()) gradient.push_back(by_name.at(name));
      const double error = testing::relative_error(gradient, expected);
      INFO("relative gradient error " << error);
      CHECK(error <= 1e-5);
    }
  }
}

TEST_CASE("GRPO rollouts are the same token for token on 1 and 2 ranks, greedy and sampled", "[dist][grpo]") {
  // The plugin's own generation (the real KV-cache engine, nothing injected)
  // of the 4 prompts × 3 completions of grpo_test_support.h, up to 16 tokens
  // each: on 2 ranks each decodes its 2 prompts, in another batch and with
  // 1 thread instead of 2, yet every sequence draws from its own generator.
  for (const std::string temperature : {"0", "1"}) {
    DYNAMIC_SECTION("temperature " << temperature) {
      std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> by_world[2];
      for (const int world : {1, 2}) {
        const CommandResult result = run_ptrain(launch_worker(world, "rollouts 5 " + temperature));
        INFO("world size " << world << "\n" << result.output);
        REQUIRE(result.exit_code == 0);
        const auto by_rank = results_by_rank(result.output);
        REQUIRE(static_cast<int>(by_rank.size()) == world);
        for (const auto& [rank, values] : by_rank) {
          CHECK(values["rollouts"].size() == static_cast<size_t>(12 / world));  // each rank its half of the prompts
          for (const auto& rollout : values["rollouts"]) {
            const std::pair<int64_t, int64_t> key{rollout["prompt"].get<int64_t>(),
                                                  rollout["generation"].get<int64_t>()};
            CHECK(by_world[world - 1].count(key) == 0);
            by_world[world - 1][key] = rollout["ids"].get<std::vector<int64_t>>();
          }
        }
      }
      REQUIRE(by_world[0].size() == 12);
      REQUIRE(by_world[1].size() == 12);
      for (const auto& [key, ids] : by_world[0]) {
        INFO("prompt " << key.first << ", generation " << key.second);
        CHECK_FALSE(ids.empty());
        CHECK(by_world[1].at(key) == ids);
      }
      // Greedy gives a group G equal completions; sampling gives each its own.
      for (int64_t prompt = 0; prompt < 4; ++prompt) {
        const std::set<std::vector<int64_t>> distinct{by_world[0].at({prompt, 0}), by_world[0].at({prompt, 1}),
                                                      by_world[0].at({prompt, 2})};
        INFO("prompt " << prompt);
        CHECK(distinct.size() == (temperature == "0" ? 1u : 3u));
      }
    }
  }
}
