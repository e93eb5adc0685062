// distributed.sharding = "optimizer" (ZeRO-1/2) and "full" (ZeRO-3) against
// replicated training, over real ranks: the same weights after several AdamW
// steps with weight decay and clipping, for each plugin, uneven splits with
// evaluation under "full", and checkpoints that resume across world sizes
// and sharding modes with the same batches.
#include "catch.h"
#include "dist_test_support.h"

#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "support/reward_model_dir.h"
#include "support/run_command.h"
#include "support/sft_reference.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace ptrain;
using testing::CommandResult;
using testing::run_ptrain;

namespace {

constexpr int kSeed = 3;
const char* kTinyModel =
    "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 2\n"
    "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n";

// AdamW with weight decay; clip_grad_norm well below the gradient norms
// here, so every step clips. Checkpoints at step 2 and at the end.
std::string common_sections() {
  return "seed = " + std::to_string(kSeed) +
         "\n[optim]\nname = \"adamw\"\nlr = 1e-2\nweight_decay = 0.1\nclip_grad_norm = 0.05\n"
         "[schedule]\nname = \"constant\"\n[train]\nmax_steps = 3\n"
         "[checkpoint]\nevery_steps = 2\nkeep_last = 2\n";
}

std::string data_file(const std::string& name) { return std::string(PTRAIN_SOURCE_DIR) + "/data/" + name; }

// GRPO learns only where rewards differ within a group, and a random model's
// completions all score alike: it starts from a model SFT-trained for 10
// steps on arithmetic, whose answers are numbers at varying distances.
fs::path warm_model(const fs::path& dir) {
  const fs::path config = dir / "warm.toml";
  std::ofstream(config) << "plugin = \"sft\"\nseed = " << kSeed << "\noutput_dir = \"" << (dir / "warm").string()
                        << "\"\n"
                        << kTinyModel << "[data]\ntrain = \"" << data_file("arith/train.jsonl")
                        << "\"\nmax_length = 16\n[batch]\nglobal_size = 16\n[optim]\nlr = 3e-2\n"
                        << "[schedule]\nname = \"constant\"\n[train]\nmax_steps = 10\n";
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return dir / "warm" / "final";
}

fs::path write_plugin_config(const fs::path& dir, const std::string& plugin) {
  const fs::path path = dir / (plugin + ".toml");
  std::ofstream out(path);
  out << "plugin = \"" << plugin << "\"\n" << common_sections();
  if (plugin == "sft") {
    out << kTinyModel << "[data]\ntrain = \"" << data_file("arith/train.jsonl")
        << "\"\nmax_length = 16\n[batch]\nglobal_size = 8\n";
  } else if (plugin == "dpo") {
    out << kTinyModel << "[data]\ntrain = \"" << data_file("arith_prefs/train.jsonl")
        << "\"\nmax_length = 16\n[batch]\nglobal_size = 8\n";
  } else {
    out << "[model]\ninit = \"" << warm_model(dir).string() << "\"\n"
        << "[data]\ntrain = \"" << data_file("arith_grpo/train.jsonl")
        << "\"\nmax_length = 16\n[batch]\nglobal_size = 4\n"
        << "[module]\nnum_generations = 4\nmax_completion_length = 4\nbeta = 0.05\n"
        << "reward_funcs = [\"closeness\", \"length\"]\n";
  }
  return path;
}

// The weights a run starts from: its model.init, or the seeded random init.
std::vector<at::Tensor> initial_weights(const fs::path& dir, const std::string& plugin, const fs::path& trained) {
  if (plugin == "grpo") return testing::parameters_of(*model::CausalLm::load_hf_dir(dir / "warm" / "final"));
  const auto config = model::CausalLm::load_hf_dir(trained / "final")->config();
  return testing::parameters_of(*model::CausalLm::init_random(config, kSeed));
}

std::vector<at::Tensor> final_weights(const fs::path& run) {
  std::vector<at::Tensor> weights;
  for (const auto& [name, parameter] : model::CausalLm::load_hf_dir(run / "final")->named_parameters()) {
    weights.push_back(parameter.detach().clone());
  }
  return weights;
}

// The files a model directory's index names, or model.safetensors alone.
std::set<std::string> weight_files(const fs::path& model_dir) {
  const fs::path index = model_dir / "model.safetensors.index.json";
  if (!fs::exists(index)) return {"model.safetensors"};
  std::set<std::string> files;
  const nlohmann::json parsed = nlohmann::json::parse(std::ifstream(index));
  for (const auto& [name, file] : parsed["weight_map"].items()) {
    files.insert(file.get<std::string>());
  }
  return files;
}

CommandResult train(int world, const fs::path& config, const fs::path& run, const std::string& sharding,
                    const std::string& extra = "") {
  return run_ptrain("launch --nproc " + std::to_string(world) + " -- train -c " + config.string() +
                    " --set output_dir=\"" + run.string() + "\" --set distributed.sharding=\"" + sharding + "\"" +
                    extra);
}

// Every logged metric but the timing ones and padding (which depends on the split).
// `absolute_margin`: for metrics that are small differences of large terms
// (DPO's reward margins), where float32 summation order shows as absolute noise.
void check_same_metrics(const fs::path& actual_run, const fs::path& expected_run, double relative_tolerance,
                        double absolute_margin = 1e-12) {
  static const std::set<std::string> timing{"step_s", "tokens_per_s", "mfu", "comm_s", "padded_tokens", "eval_s"};
  const auto actual = testing::read_metrics_jsonl(actual_run / "metrics.jsonl");
  const auto expected = testing::read_metrics_jsonl(expected_run / "metrics.jsonl");
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    for (const auto& [key, value] : expected[i].items()) {
      if (timing.count(key) != 0 || key.rfind("time/", 0) == 0 || !value.is_number()) continue;  // time/: phase timers
      INFO("step " << expected[i]["step"] << ", metric " << key);
      REQUIRE(actual[i].contains(key));
      CHECK(actual[i][key].get<double>() == Approx(value.get<double>()).epsilon(relative_tolerance).margin(absolute_margin));
    }
  }
}

struct PairedRuns {
  fs::path none, full;
  std::string none_output, full_output;
};

// `config` with `extra` settings at world size 2, under sharding "none" and
// "full" (in dir/<name>_none and dir/<name>_full): every logged metric within
// `metric_tolerance` relative or `metric_margin` absolute, final weights within 1e-6.
PairedRuns full_against_none(const fs::path& dir, const std::string& name, const fs::path& config,
                             const std::string& extra, double metric_tolerance, double metric_margin = 1e-12,
                             const std::string& full_only_extra = "") {
  PairedRuns runs{dir / (name + "_none"), dir / (name + "_full"), "", ""};
  const CommandResult replicated_run = train(2, config, runs.none, "none", extra);
  INFO(name << "\n" << replicated_run.output);
  REQUIRE(replicated_run.exit_code == 0);
  const CommandResult sharded_run = train(2, config, runs.full, "full", extra + full_only_extra);
  INFO(sharded_run.output);
  REQUIRE(sharded_run.exit_code == 0);
  check_same_metrics(runs.full, runs.none, metric_tolerance, metric_margin);
  const double error = testing::relative_error(final_weights(runs.full), final_weights(runs.none));
  INFO("relative weight error " << error);
  CHECK(error <= 1e-6);
  runs.none_output = replicated_run.output;
  runs.full_output = sharded_run.output;
  return runs;
}

}  // namespace

TEST_CASE("optimizer and full sharding give the weights of replicated training after several AdamW steps",
          "[dist][sharding]") {
  for (const std::string plugin : {"sft", "dpo", "grpo"}) {
    const fs::path dir = testing::fresh_test_dir("sharding_" + plugin);
    const fs::path config = write_plugin_config(dir, plugin);
    for (const int world : {2, 4}) {
      const fs::path none = dir / ("none_w" + std::to_string(world));
      const CommandResult replicated_run = train(world, config, none, "none");
      INFO(plugin << ", world " << world << "\n" << replicated_run.output);
      REQUIRE(replicated_run.exit_code == 0);
      const std::vector<at::Tensor> expected = final_weights(none);
      for (const std::string mode : {"optimizer", "full"}) {
        const fs::path sharded = dir / (mode + "_w" + std::to_string(world));
        const CommandResult sharded_run = train(world, config, sharded, mode);
        INFO(mode << "\n" << sharded_run.output);
        REQUIRE(sharded_run.exit_code == 0);
        // DPO's and GRPO's reference (a frozen copy of the initial policy) is sharded the same way.
        if (mode == "full" && plugin != "sft") {
          CHECK_THAT(sharded_run.output, Catch::Contains("a reference model's 2 decoder layers are sharded too"));
        }
        const double error = testing::relative_error(final_weights(sharded), expected);
        INFO("relative weight error " << error);
        CHECK(error <= 1e-6);
        // Under "full" each microbatch's layer gradients are summed over ranks
        // at once, not after accumulation: another float32 summation order,
        // which differences such as DPO's reward margins magnify a little.
        // Under "optimizer" each rank steps its shard of the flat parameters
        // with the foreach/fused AdamW over other tensor lists than the
        // replicated run's: the weights agree to float32 rounding, which
        // the margins' cancellation shows as absolute noise of ~1e-8.
        if (mode == "full") {
          check_same_metrics(sharded, none, 1e-5, 2e-7);
        } else {
          check_same_metrics(sharded, none, 1e-6, 1e-7);
        }
      }
      // The steps clipped and moved the weights far more than the tolerance.
      const auto metrics = testing::read_metrics_jsonl(none / "metrics.jsonl");
      CHECK(metrics.front()["grad_norm"].get<double>() > 0.05);
      CHECK(testing::relative_error(initial_weights(dir, plugin, none), expected) > 1e-3);
    }
  }
}

TEST_CASE("full sharding matches replicated training when ranks run different numbers of forwards",
          "[dist][sharding]") {
  // 7 examples over 2 ranks: one per microbatch (4 forwards on one rank, 3 on
  // the other) with an uneven held-out set evaluated after every step (the
  // training set again, its last example on one rank only) and best/; or
  // packed into rows under a token budget.
  const fs::path dir = testing::fresh_test_dir("sharding_full_uneven");
  const fs::path config = write_plugin_config(dir, "sft");
  const std::string uneven = " --set batch.global_size=7";
  const std::vector<std::pair<std::string, std::string>> variants{
      {"microbatches", uneven + " --set batch.micro_size=1 --set eval.data=\"" + data_file("arith/train.jsonl") +
                           "\" --set eval.max_examples=5 --set eval.every_steps=1"
                           " --set checkpoint.best_metric=\"eval/loss\""},
      {"packed", uneven + " --set batch.micro_tokens=32 --set batch.packing=true"}};
  for (const auto& [name, settings] : variants) {
    const PairedRuns runs = full_against_none(dir, name, config, settings, 1e-6);
    if (name == "microbatches") {
      REQUIRE(testing::read_metrics_jsonl(runs.full / "metrics.jsonl").back().contains("eval/loss"));
      // Each rank wrote its share of every model directory (rank_weight_writer.h).
      for (const fs::path& model_dir : {runs.full / "best", runs.full / "final", runs.full / "checkpoints" / "step_3"}) {
        INFO(model_dir);
        CHECK(weight_files(model_dir) == std::set<std::string>{"model-00001-of-00002.safetensors",
                                                                "model-00002-of-00002.safetensors"});
      }
      CHECK(weight_files(runs.none / "final") == std::set<std::string>{"model.safetensors"});
    }
  }
  // DPO, one pair per microbatch: the rank with 4 ends its step later.
  full_against_none(dir, "dpo", write_plugin_config(dir, "dpo"), uneven + " --set batch.micro_size=1", 1e-5, 2e-7);
}

TEST_CASE("full sharding under bf16-mixed gathers bfloat16 matrices and matches replicated bf16-mixed training",
          "[dist][sharding][bf16]") {
  // The matrices only enter bfloat16 matrix products, which round them the
  // same way; norm weights and biases arrive exactly. So the result is
  // replicated bf16-mixed training's, up to the float32 summation order.
  const fs::path dir = testing::fresh_test_dir("sharding_full_bf16");
  const fs::path config = write_plugin_config(dir, "sft");
  const PairedRuns runs =
      full_against_none(dir, "bf16", config, " --set runtime.precision=\"bf16-mixed\"", 1e-5, 2e-7);
  CHECK_THAT(runs.full_output, Catch::Contains("their gathers move the matrices in bfloat16"));
  // The steps moved the weights far more than the tolerance.
  CHECK(testing::relative_error(initial_weights(dir, "sft", runs.none), final_weights(runs.none)) > 1e-3);
}

TEST_CASE("full sharding shards a GRPO reward model's decoder layers and scores as replicated training does",
          "[dist][sharding][grpo][reward_model]") {
  // Rollouts of different lengths: one rank scores with the reward model
  // while the other still generates with the policy (the ranks meet first).
  const fs::path dir = testing::fresh_test_dir("sharding_full_reward_model");
  testing::write_tiny_reward_model(dir / "tiny_rm");
  const fs::path config = write_plugin_config(dir, "grpo");  // [module] comes last
  std::ofstream(config, std::ios::app) << "reward_models = [\"" << (dir / "tiny_rm").string()
                                       << "\"]\nreward_weights = [1.0, 1.0, 0.5]\n";
  const PairedRuns runs = full_against_none(dir, "reward_model", config, "", 1e-5, 2e-7);
  CHECK_THAT(runs.full_output, Catch::Contains("a reward model's 2 decoder layers are sharded too"));
  CHECK(testing::read_metrics_jsonl(runs.full / "metrics.jsonl").front().contains("rewards/tiny_rm/mean"));
}

TEST_CASE("full sharding: GRPO rollouts from the policy's layers held whole give replicated training's result",
          "[dist][sharding][grpo]") {
  // distributed.generation_gather = "whole": one gather of every layer per
  // rollout call instead of one per decoding step, the same samples.
  const fs::path dir = testing::fresh_test_dir("sharding_full_whole_rollouts");
  // (A key of sharding "full" only: the replicated run is refused it.)
  const PairedRuns runs = full_against_none(dir, "whole", write_plugin_config(dir, "grpo"), "", 1e-5, 2e-7,
                                            " --set distributed.generation_gather=\"whole\"");
  CHECK_THAT(runs.full_output, Catch::Contains("rollouts hold them whole"));
}

TEST_CASE("full sharding: a TR-DPO reference sync blends the sharded reference as replicated training does",
          "[dist][sharding][dpo]") {
  // The reference (sharded too) takes 0.5·policy + 0.5·reference before every step after the first.
  // Reward margins of ~3e-3 differed by 3.6e-8 on LibTorch 2.6 (another float32 summation order).
  const fs::path dir = testing::fresh_test_dir("sharding_full_trdpo");
  const std::string sync =
      " --set module.sync_reference=true --set module.sync_reference_steps=1 --set module.sync_reference_alpha=0.5";
  const PairedRuns runs = full_against_none(dir, "trdpo", write_plugin_config(dir, "dpo"), sync, 1e-5, 2e-7);
  CHECK_THAT(runs.none_output, Catch::Contains("reference ← 0.5"));
}

TEST_CASE("a checkpoint resumes across world sizes 1, 2, 4 and sharding modes with the same batches",
          "[dist][sharding][resume]") {
  const fs::path dir = testing::fresh_test_dir("sharding_resume");
  const fs::path config = write_plugin_config(dir, "sft");
  const std::string six_steps = " --set train.max_steps=6";
  REQUIRE(train(2, config, dir / "straight", "none", six_steps).exit_code == 0);

  struct Case {
    int first_world;
    const char* first_sharding;
    int second_world;
    const char* second_sharding;
  };
  for (const Case& c :
       {Case{2, "optimizer", 1, "none"}, Case{1, "none", 2, "optimizer"}, Case{2, "optimizer", 2, "none"},
        Case{2, "none", 2, "optimizer"}, Case{2, "optimizer", 4, "optimizer"}, Case{2, "full", 1, "none"},
        Case{2, "none", 2, "full"}, Case{4, "full", 2, "optimizer"}}) {
    const fs::path run = dir / (std::string(c.first_sharding) + std::to_string(c.first_world) + "_" +
                                c.second_sharding + std::to_string(c.second_world));
    const CommandResult first = train(c.first_world, config, run, c.first_sharding, " --set train.max_steps=4");
    INFO(first.output);
    REQUIRE(first.exit_code == 0);
    const CommandResult resumed = train(c.second_world, config, run, c.second_sharding, six_steps + " --resume auto");
    INFO(resumed.output);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.output, Catch::Contains("continuing from"));
    // Step 4 is the first run's: a sharded one holds a file per rank, nothing gathered.
    const fs::path step_4 = run / "checkpoints" / "step_4";
    const bool sharded = std::string(c.first_sharding) != "none" && c.first_world > 1;
    CHECK(fs::exists(step_4 / "optimizer.safetensors") == !sharded);
    for (int rank = 0; rank < c.first_world; ++rank) {
      CHECK(fs::exists(step_4 / ("optimizer_shard_" + std::to_string(rank) + "_of_" + std::to_string(c.first_world) +
                                 ".safetensors")) == sharded);
    }
    check_same_metrics(run, dir / "straight", 1e-5);
    const double error = testing::relative_error(final_weights(run), final_weights(dir / "straight"));
    INFO("relative weight error " << error);
    CHECK(error <= 1e-5);
  }
}

namespace {

// The RESULT of every rank of `dist_worker MODE` on `world` ranks.
std::map<int, nlohmann::json> worker_results(int world, const std::string& mode) {
  const CommandResult result = run_ptrain(dist_test::launch_worker(world, mode));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  auto by_rank = dist_test::results_by_rank(result.output);
  REQUIRE(static_cast<int>(by_rank.size()) == world);
  return by_rank;
}

}  // namespace

TEST_CASE("full sharding's layer shards gather the weights and reduce-scatter gradients into each rank's chunk",
          "[dist][sharding]") {
  // A 26-element layer (dist_worker.cpp, worker_layer_shards.cpp); the
  // expectations are closed forms of small integers, exact in float32.
  for (const int world : {2, 3, 4}) {
    INFO("world size " << world);
    for (const auto& [rank, values] : worker_results(world, "layer_shards")) {
      INFO("rank " << rank);
      CHECK(values["released"].get<bool>());
      CHECK(values["chunk"].get<int64_t>() == (26 + world - 1) / world);
      CHECK(values["gather_error"].get<double>() == 0.0);
      CHECK(values["single_error"].get<double>() == 0.0);
      CHECK(values["accumulated_error"].get<double>() == 0.0);
      CHECK(values["update_error"].get<double>() == 0.0);
      CHECK(values["grad_zeroed"].get<bool>());
      // A bfloat16 gather: matrices rounded as bfloat16 rounds them, 1-D tensors bit-exact.
      CHECK(values["rounded"].get<bool>());
      CHECK(values["rounded_error"].get<double>() == 0.0);
    }
  }
}

TEST_CASE("full sharding: a model's sharded layers give the summed gradients of every rank's microbatches",
          "[dist][sharding]") {
  // dist_worker.cpp, worker_sharded_layers.cpp: two microbatches per rank
  // against unsharded copies of the same model, one running every rank's
  // microbatches; float32 sums in another order, hence the tolerance.
  for (const int world : {1, 2, 4}) {
    INFO("world size " << world);
    for (const auto& [rank, values] : worker_results(world, "sharded_layers")) {
      INFO("rank " << rank);
      CHECK(values["released"].get<bool>());
      CHECK(values["loss_error"].get<double>() <= 1e-6);
      CHECK(values["layer_error"].get<double>() <= 1e-6);
      CHECK(values["replicated_error"].get<double>() <= 1e-6);
      CHECK(values["eval_error"].get<double>() <= 1e-6);
      CHECK(values["detached_error"].get<double>() == 0.0);
    }
  }
}

TEST_CASE("full sharding: AdamW steps on sharded layers give the weights and optimizer state of unsharded training",
          "[dist][sharding]") {
  // dist_worker.cpp, worker_sharded_layers.cpp: 3 steps of 2 microbatches
  // per rank, weight decay, every step clipped, against an unsharded copy
  // stepped on every rank's microbatches in one process. Then the ranks'
  // optimizer state files, joined, against the copy's state (per tensor:
  // moments of gradients summed in another order), and a fourth step from
  // that state loaded into a new sharded optimizer.
  for (const int world : {1, 2, 4}) {
    INFO("world size " << world);
    const fs::path dir = testing::fresh_test_dir("full_adamw_w" + std::to_string(world));
    for (const auto& [rank, values] : worker_results(world, "full_adamw " + dir.string())) {
      INFO("rank " << rank);
      CHECK(values["weight_error"].get<double>() <= 1e-6);
      CHECK(values["norm_error"].get<double>() <= 1e-6);
      CHECK(values["smallest_norm"].get<double>() > 0.05);  // clipped every step
      CHECK(values["moved"].get<double>() > 1e-3);          // far more than the tolerance
      CHECK(values["state_error"].get<double>() <= 1e-5);
      CHECK(values["resumed_error"].get<double>() <= 1e-6);
    }
    for (int r = 0; r < world; ++r) {
      CHECK(
          fs::exists(dir / ("optimizer_shard_" + std::to_string(r) + "_of_" + std::to_string(world) + ".safetensors")));
    }
  }
}

TEST_CASE("full sharding: ranks announcing different layer operations both fail with the operation named",
          "[dist][sharding]") {
  for (const auto& [rank, values] : worker_results(2, "layer_divergence")) {
    INFO("rank " << rank);
    CHECK_THAT(values["error"].get<std::string>(),
               Catch::Contains("runs the gather of layer " + std::to_string(rank)) &&
                   Catch::Contains("another rank runs a different layer operation"));
  }
}

TEST_CASE("full sharding: a rank meeting its peers before another model's layers does not end their drain",
          "[dist][sharding]") {
  // dist_worker.cpp, worker_sharded_layers.cpp: rank 0 moves from model A's
  // layers to model B's while its peers, done, wait to all-reduce.
  for (const int world : {2, 4}) {
    INFO("world size " << world);
    for (const auto& [rank, values] : worker_results(world, "layer_meeting")) {
      INFO("rank " << rank << ": " << values.dump());
      CHECK_FALSE(values.contains("error"));
      CHECK(values["sum"].get<double>() == world * (world + 1) / 2.0);
      if (rank == 0) CHECK(values["b_error"].get<double>() == 0.0);
    }
  }
}

TEST_CASE("full sharding: every rank writes its share of the weights, refused alike on every rank for a NaN",
          "[dist][sharding]") {
  // dist_worker.cpp, worker_rank_weights.cpp: the tiny model's 5 groups
  // (embeddings, 2 layers, final norm, lm_head) balanced over the ranks,
  // read back from the files alone against an unsharded copy.
  for (const int world : {1, 2, 4}) {
    INFO("world size " << world);
    const fs::path dir = testing::fresh_test_dir("rank_weights_w" + std::to_string(world));
    for (const auto& [rank, values] : worker_results(world, "rank_weights " + dir.string())) {
      INFO("rank " << rank << ": " << values.dump());
      CHECK(values["float32"]["error"].get<double>() == 0.0);
      CHECK(values["float32"]["files"].get<int>() == world);  // one file a rank
      const int parameters = values["parameters"].get<int>();
      CHECK(values["float32"]["index_entries"].get<int>() == (world == 1 ? 0 : parameters));
      CHECK(values["bfloat16"]["error"].get<double>() == 0.0);
      CHECK(values["bfloat16"]["files"].get<int>() > world);  // 8 kB shards
      CHECK(values["bfloat16"]["index_entries"].get<int>() == parameters);
      CHECK(values["released"].get<bool>());
      CHECK_THAT(values["nan_tensor"].get<std::string>(), Catch::StartsWith("model.layers.1."));
      CHECK(values["nan_error"].get<std::string>() ==
            (dir / "target").string() + ": refusing to write: weight tensor '" +
                values["nan_tensor"].get<std::string>() + "' holds NaN or Inf");
      CHECK(values["nan_dir_empty"].get<bool>());
    }
  }
}
