// Evaluation during training ([eval]), best/ and early stopping, through the
// `ptrain` executable: eval/loss is compared with the SFT loss computed from
// its definition (support/sft_reference.h) on the saved model.
#include "catch.h"

#include "support/run_command.h"
#include "support/sft_reference.h"
#include "support/test_util.h"

#include "core/model/causal_lm.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/tensor.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ptrain::testing::CommandResult;
using ptrain::testing::PromptCompletion;
using ptrain::testing::run_ptrain;

namespace {

constexpr int64_t kMaxLength = 16;

// Held-out examples of different lengths; 7 of them, so two ranks hold 4 and 3.
const std::vector<PromptCompletion> kHeldOut = {{"1+1=", "2"},  {"12+30=", "42"}, {"7-3=", "4"}, {"99-9=", "90"},
                                                {"5+5=", "10"}, {"64-32=", "32"}, {"3+4=", "7"}};

void write_jsonl(const fs::path& path, const std::vector<PromptCompletion>& examples) {
  std::ofstream out(path);
  for (const PromptCompletion& example : examples) {
    out << nlohmann::json{{"prompt", example.prompt}, {"completion", example.completion}}.dump() << "\n";
  }
}

// A small SFT run on `train`, evaluated on `eval` every `every_steps`; `extra` adds sections at the end.
fs::path write_config(const fs::path& dir, const fs::path& train, const fs::path& eval, int64_t every_steps,
                      const std::string& extra) {
  const fs::path path = dir / "eval.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = 2\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << train.string() << "\"\nmax_length = " << kMaxLength << "\n"
                      << "[optim]\nlr = 1e-2\n[schedule]\nname = \"constant\"\n"
                      << "[runtime]\nthreads = 1\n"
                      << "[eval]\ndata = \"" << eval.string() << "\"\nevery_steps = " << every_steps << "\n"
                      << extra;
  return path;
}

// The token-mean SFT loss of `examples` under the model in `model_dir`, from its definition.
double reference_eval_loss(const fs::path& model_dir, const std::vector<PromptCompletion>& examples) {
  const auto model = ptrain::model::CausalLm::load_hf_dir(model_dir);
  const at::NoGradGuard no_grad;
  return ptrain::testing::reference_sft_step_loss(*model, examples, {ptrain::sdk::LossAggregation::kTokenMean},
                                                  kMaxLength)
      .item<double>();
}

std::vector<nlohmann::json> run_metrics(const fs::path& run) {
  return ptrain::testing::read_metrics_jsonl(run / "metrics.jsonl");
}

}  // namespace

TEST_CASE("eval/loss is the held-out loss of the model, for 1 and 2 ranks with uneven shards", "[e2e][eval]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("eval_loss");
  write_jsonl(dir / "held_out.jsonl", kHeldOut);
  const fs::path config =
      write_config(dir, fs::path(PTRAIN_SOURCE_DIR) / "data/arith/train.jsonl", dir / "held_out.jsonl", 2,
                   "[batch]\nglobal_size = 4\nmicro_size = 1\n[train]\nmax_steps = 3\n");
  for (const int world : {1, 2}) {
    const fs::path run = dir / ("world" + std::to_string(world));
    const CommandResult result = run_ptrain("launch --nproc " + std::to_string(world) + " -- train -c " +
                                            config.string() + " --set output_dir=\"" + run.string() + "\" 2>&1");
    INFO("world size " << world << "\n" << result.output);
    REQUIRE(result.exit_code == 0);
    const std::vector<nlohmann::json> records = run_metrics(run);
    REQUIRE(records.size() == 3);
    // every_steps = 2: after step 2, and after the last step (3).
    CHECK_FALSE(records[0].contains("eval/loss"));
    CHECK(records[1].contains("eval/loss"));
    REQUIRE(records[2].contains("eval/loss"));
    CHECK(records[2].contains("eval_s"));
    CHECK(records[2].at("eval/tokens").get<double>() > 0.0);

    const double expected = reference_eval_loss(run / "final", kHeldOut);
    const double actual = records[2].at("eval/loss").get<double>();
    INFO("eval/loss " << actual << ", reference " << expected);
    CHECK(std::abs(actual - expected) <= 1e-5 * std::abs(expected));
  }
}

namespace {

// Training teaches completions "aaaa"; the held-out set wants "aaab": its
// loss falls while the model learns the a's, then rises as it grows sure of
// a fourth 'a'. Returns the config of a run evaluated after every step,
// keeping best/ by eval/loss, with early stopping after `patience`.
fs::path write_early_stopping_run(const fs::path& dir, int64_t max_steps, int64_t patience,
                                  std::vector<PromptCompletion>& held_out) {
  std::vector<PromptCompletion> train;
  for (int i = 0; i < 16; ++i) train.push_back({"q" + std::to_string(i % 4) + "=", "aaaa"});
  held_out.clear();
  for (int i = 0; i < 5; ++i) held_out.push_back({"q" + std::to_string(i % 4) + "=", "aaab"});
  write_jsonl(dir / "train.jsonl", train);
  write_jsonl(dir / "held_out.jsonl", held_out);
  return write_config(dir, dir / "train.jsonl", dir / "held_out.jsonl", 1,
                      "[batch]\nglobal_size = 4\n[train]\nmax_steps = " + std::to_string(max_steps) +
                          "\nearly_stopping_patience = " + std::to_string(patience) +
                          "\n[checkpoint]\nevery_steps = 5\nbest_metric = \"eval/loss\"\nbest_mode = \"min\"\n");
}

}  // namespace

TEST_CASE("best/ holds the best evaluation's model, and early stopping stops at the right evaluation",
          "[e2e][eval][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("eval_best");
  constexpr int64_t kMaxSteps = 30;
  constexpr int64_t kPatience = 2;
  std::vector<PromptCompletion> held_out;
  const fs::path config = write_early_stopping_run(dir, kMaxSteps, kPatience, held_out);
  const fs::path run = dir / "run";
  const CommandResult result =
      run_ptrain("train -c " + config.string() + " --set output_dir=\"" + run.string() + "\" 2>&1");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);

  // The rule applied to the logged evaluations: the best so far, and the
  // evaluation at which kPatience in a row have not beaten it.
  const std::vector<nlohmann::json> records = run_metrics(run);
  double best = std::numeric_limits<double>::infinity();
  int64_t best_step = 0;
  int64_t expected_stop = kMaxSteps;
  int64_t without_improvement = 0;
  for (const nlohmann::json& record : records) {
    REQUIRE(record.contains("eval/loss"));
    const double loss = record.at("eval/loss").get<double>();
    const int64_t step = record.at("step").get<int64_t>();
    if (loss < best) {
      best = loss;
      best_step = step;
      without_improvement = 0;
    } else if (++without_improvement == kPatience) {
      expected_stop = step;
      break;
    }
  }
  REQUIRE(expected_stop < kMaxSteps);  // the data makes the run stop early
  REQUIRE(best_step > 1);              // ... after improving for a while
  CHECK(records.back().at("step").get<int64_t>() == expected_stop);
  CHECK(ptrain::testing::contains(result.output, "early stopping: eval/loss did not improve in 2 evaluations"));
  CHECK(ptrain::testing::contains(
      result.output, (run / "best").string() + " now holds step " + std::to_string(best_step) + " (eval/loss = "));

  // best/ is a complete model directory with the best step's weights: its
  // held-out loss is the best eval/loss; final/ has the last step's.
  CHECK(fs::exists(run / "best" / "config.json"));
  const double best_loss = reference_eval_loss(run / "best", held_out);
  INFO("best eval/loss " << best << " at step " << best_step << ", best/ gives " << best_loss);
  CHECK(std::abs(best_loss - best) <= 1e-5 * std::abs(best));
  const double final_loss = reference_eval_loss(run / "final", held_out);
  CHECK(std::abs(final_loss - records.back().at("eval/loss").get<double>()) <= 1e-5 * final_loss);
}

namespace {

// One held-out prompt's greedy completion, decoded from the model's full
// forward (no KV cache, no sampler): its tokens, <eos> included, and whether
// it ran out of room before <eos>.
struct GreedyCompletion {
  std::vector<int64_t> ids;
  bool truncated = true;
};

GreedyCompletion greedy_completion(ptrain::model::CausalLm& model, const std::string& prompt, int64_t room) {
  constexpr int64_t kBos = 256, kEos = 257;  // the byte tokenizer's (DESIGN.md §6)
  std::vector<int64_t> ids{kBos};
  for (const unsigned char byte : prompt) ids.push_back(byte);
  GreedyCompletion completion;
  const at::NoGradGuard no_grad;
  while (static_cast<int64_t>(completion.ids.size()) < room) {
    const at::Tensor input = at::tensor(ids, at::kLong).unsqueeze(0);
    const int64_t next = model.logits(input)[0][-1].argmax().item<int64_t>();
    ids.push_back(next);
    completion.ids.push_back(next);
    if (next == kEos) {
      completion.truncated = false;
      break;
    }
  }
  return completion;
}

}  // namespace

TEST_CASE("GRPO evaluates the rewards of greedy completions of the held-out prompts", "[e2e][eval][grpo][device]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("eval_grpo");
  const std::vector<std::pair<std::string, std::string>> prompts = {
      {"1+1=", "2"}, {"12+30=", "42"}, {"7-3=", "4"}, {"99-9=", "90"}, {"5+5=", "10"}};
  {
    std::ofstream train(dir / "train.jsonl");
    std::ofstream held_out(dir / "held_out.jsonl");
    for (const auto& [prompt, answer] : prompts) {
      const std::string line = nlohmann::json{{"prompt", prompt}, {"answer", answer}}.dump() + "\n";
      train << line;
      held_out << line;
    }
  }
  constexpr int64_t kMaxCompletion = 8;
  const fs::path config = dir / "grpo.toml";
  std::ofstream(config) << "plugin = \"grpo\"\nseed = 5\n"
                        << "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
                        << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                        << "[data]\ntrain = \"" << (dir / "train.jsonl").string() << "\"\nmax_length = " << kMaxLength
                        << "\n[batch]\nglobal_size = 2\nmicro_size = 3\n[optim]\nlr = 1e-3\n"
                        << "[train]\nmax_steps = 2\n[runtime]\nthreads = 1\n"
                        << "[eval]\ndata = \"" << (dir / "held_out.jsonl").string() << "\"\n"
                        << "[module]\nnum_generations = 2\nmax_completion_length = " << kMaxCompletion << "\n"
                        << "reward_funcs = [\"length\", \"format\"]\nreward_weights = [1.0, 0.5]\n"
                        << "format_pattern = \"[0-9]+\"\n";
  for (const int world : {1, 2}) {
    const fs::path run = dir / ("world" + std::to_string(world));
    const CommandResult result = run_ptrain("launch --nproc " + std::to_string(world) + " -- train -c " +
                                            config.string() + " --set output_dir=\"" + run.string() + "\" 2>&1");
    INFO("world size " << world << "\n" << result.output);
    REQUIRE(result.exit_code == 0);
    const nlohmann::json last = run_metrics(run).back();

    // The rewards from their definitions: length (DAPO's soft overlong
    // penalty, overlong_cache = max_completion_length / 4) and format.
    const auto model = ptrain::model::CausalLm::load_hf_dir(run / "final");
    const int64_t free_length = kMaxCompletion - kMaxCompletion / 4;
    double reward_sum = 0.0, length_sum = 0.0, format_sum = 0.0;
    for (const auto& [prompt, answer] : prompts) {
      const int64_t prompt_tokens = static_cast<int64_t>(prompt.size()) + 1;
      const GreedyCompletion completion =
          greedy_completion(*model, prompt, std::min(kMaxCompletion, kMaxLength - prompt_tokens));
      const auto n = static_cast<int64_t>(completion.ids.size());
      const double length = n <= free_length ? 0.0 : static_cast<double>(free_length - n) / (kMaxCompletion / 4);
      std::string text;
      for (const int64_t id : completion.ids) {
        if (id < 256) text.push_back(static_cast<char>(id));
      }
      const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
      const double format = !completion.truncated && digits ? 1.0 : 0.0;
      reward_sum += 1.0 * length + 0.5 * format;
      format_sum += format;
      length_sum += static_cast<double>(n);
    }
    const double count = static_cast<double>(prompts.size());
    CHECK(last.at("eval/reward").get<double>() == Approx(reward_sum / count).margin(1e-12));
    CHECK(last.at("eval/rewards/format/mean").get<double>() == Approx(format_sum / count).margin(1e-12));
    CHECK(last.at("eval/completions/mean_length").get<double>() == Approx(length_sum / count).margin(1e-12));
    // One completion per prompt: no group statistics.
    CHECK_FALSE(last.contains("eval/reward_std"));
    CHECK(last.at("eval/loss").get<double>() == 0.0);  // beta = 0 and no advantage
  }
}

namespace {

// Runs `config` into dir/<name> with `overrides` and returns its records.
std::vector<nlohmann::json> train_run(const fs::path& config, const fs::path& run, const std::string& overrides) {
  const CommandResult result =
      run_ptrain("train -c " + config.string() + " --set output_dir=\"" + run.string() + "\" " + overrides + " 2>&1");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return run_metrics(run);
}

// The training figures of two runs are the same, bit for bit, step by step.
void check_same_training(const std::vector<nlohmann::json>& plain, const std::vector<nlohmann::json>& evaluated) {
  REQUIRE(plain.size() == evaluated.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("step " << plain[i].at("step"));
    for (const char* key : {"loss", "grad_norm", "units"}) CHECK(plain[i].at(key) == evaluated[i].at(key));
    CHECK(plain[i].at("grad_norm").get<double>() > 0.0);  // there was something to disturb
    CHECK_FALSE(plain[i].contains("eval/loss"));
    CHECK(evaluated[i].contains("eval/loss"));
  }
}

}  // namespace

TEST_CASE("an evaluation leaves training as it was: DPO's bco_pair delta, GRPO's reused rollouts", "[e2e][eval]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("eval_untouched");
  const std::string model =
      "[model]\nvocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
      "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n[runtime]\nthreads = 1\n";
  {
    // bco_pair's delta is the running mean of the training rewards; held-out
    // rewards must not enter it.
    const fs::path prefs = fs::path(PTRAIN_SOURCE_DIR) / "data/arith_prefs/train.jsonl";
    const fs::path config = dir / "dpo.toml";
    std::ofstream(config) << "plugin = \"dpo\"\nseed = 1\n"
                          << model << "[data]\ntrain = \"" << prefs.string() << "\"\nmax_length = 16\n"
                          << "[batch]\nglobal_size = 4\n[optim]\nlr = 1e-2\n[train]\nmax_steps = 4\n"
                          << "[module]\nloss = [\"bco_pair\"]\n";
    const auto plain = train_run(config, dir / "dpo_plain", "");
    const auto evaluated = train_run(config, dir / "dpo_eval",
                                     "--set eval.data=\"" + prefs.string() +
                                         "\" --set eval.every_steps=1 "
                                         "--set eval.max_examples=6");
    check_same_training(plain, evaluated);
    CHECK(evaluated.back().contains("eval/rewards/accuracy"));
  }
  {
    // num_iterations = 2: step 2 trains on step 1's rollouts, across the evaluation between them.
    const fs::path prompts = dir / "prompts.jsonl";
    std::ofstream(prompts) << "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"prompt\": \"2+3=\", \"answer\": \"5\"}\n"
                           << "{\"prompt\": \"7-3=\", \"answer\": \"4\"}\n";
    const fs::path config = dir / "grpo.toml";
    std::ofstream(config) << "plugin = \"grpo\"\nseed = 1\n"
                          << model << "[data]\ntrain = \"" << prompts.string() << "\"\nmax_length = 16\n"
                          << "[batch]\nglobal_size = 2\n[optim]\nlr = 1e-2\n[train]\nmax_steps = 4\n"
                          << "[module]\nnum_generations = 8\nmax_completion_length = 8\nnum_iterations = 2\n"
                          << "reward_plugins = [\"" << PTRAIN_TEST_PLUGIN_DIR
                          << "/libptrain_reward_test_rewards.so\"]\n"
                          << "reward_funcs = [\"digit_count\"]\n";
    const auto plain = train_run(config, dir / "grpo_plain", "");
    const auto evaluated =
        train_run(config, dir / "grpo_eval", "--set eval.data=\"" + prompts.string() + "\" --set eval.every_steps=1");
    check_same_training(plain, evaluated);
    CHECK(evaluated.back().contains("eval/reward"));
  }
}

TEST_CASE("a resumed run goes on comparing with the best of the run it continues", "[e2e][eval]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("eval_resume");
  std::vector<PromptCompletion> held_out;
  const fs::path config = write_early_stopping_run(dir, 30, 2, held_out);
  const auto run_output = [&](const fs::path& run, const std::string& arguments) {
    const CommandResult result =
        run_ptrain("train -c " + config.string() + " --set output_dir=\"" + run.string() + "\" " + arguments + " 2>&1");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    return result.output;
  };
  const std::string straight = run_output(dir / "straight", "");
  // The same run, stopped after step 10 and resumed (the schedule is constant).
  run_output(dir / "resumed", "--set train.max_steps=10");
  const std::string resumed = run_output(dir / "resumed", "--resume auto");

  const std::vector<nlohmann::json> expected = run_metrics(dir / "straight");
  const std::vector<nlohmann::json> actual = run_metrics(dir / "resumed");
  REQUIRE(expected.size() > 10);  // the straight run stops after step 10, or the test shows nothing
  REQUIRE(actual.size() == expected.size());
  CHECK(actual.back().at("eval/loss") == expected.back().at("eval/loss"));
  CHECK(ptrain::testing::contains(resumed, "resuming with best/ of step "));
  const auto stop_line = [](const std::string& output) { return output.substr(output.find("early stopping: ")); };
  CHECK(ptrain::testing::contains(stop_line(resumed),
                                  stop_line(straight).substr(0, stop_line(straight).find(", kept in"))));
  CHECK(ptrain::testing::same_safetensors(dir / "straight" / "best" / "model.safetensors",
                                          dir / "resumed" / "best" / "model.safetensors"));
}
