// `ptrain train` with a bad [eval]: refused before training starts, so no
// run directory is created and nothing is trained.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

// A one-step SFT run on `train` evaluated on `eval`, into dir/run.
fs::path write_eval_config(const fs::path& dir, const fs::path& train, const fs::path& eval, const std::string& extra) {
  const fs::path path = dir / "eval.toml";
  std::ofstream(path) << "plugin = \"sft\"\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 16\nintermediate_size = 32\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << train.string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 2\n[train]\nmax_steps = 1\n[runtime]\nthreads = 1\n"
                      << "[eval]\ndata = \"" << eval.string() << "\"\n"
                      << extra;
  return path;
}

const std::string kExamples =
    "{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n{\"prompt\": \"2+2=\", \"completion\": \"4\"}\n";

}  // namespace

TEST_CASE("train refuses a bad held-out set before training starts", "[bad_inputs][data][eval]") {
  const fs::path dir = testing::fresh_test_dir("bad_eval_run");
  const fs::path train = testing::write_text_file(dir, "train.jsonl", kExamples);
  const fs::path eval =
      testing::write_text_file(dir, "held_out.jsonl", kExamples + "{\"prompt\": 7, \"completion\": \"x\"}\n");
  const testing::CommandResult result =
      testing::run_ptrain("train -c " + write_eval_config(dir, train, eval, "").string() + " 2>&1");
  INFO(result.output);
  CHECK(result.exit_code != 0);
  CHECK(testing::contains(result.output, eval.string() + ":3: field 'prompt': expected a string"));
  CHECK_FALSE(fs::exists(dir / "run"));
}

TEST_CASE("train refuses a best_metric the plugin's evaluation does not give", "[bad_inputs][config][eval]") {
  const fs::path dir = testing::fresh_test_dir("bad_best_metric");
  const fs::path train = testing::write_text_file(dir, "train.jsonl", kExamples);
  const fs::path config =
      write_eval_config(dir, train, train, "[checkpoint]\nbest_metric = \"eval/rewards/accuracy\"\n");
  const testing::CommandResult result = testing::run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(result.output);
  CHECK(result.exit_code != 0);
  CHECK(testing::contains(result.output,
                          "key 'checkpoint.best_metric' = \"eval/rewards/accuracy\" is not a metric "
                          "of the plugin's evaluation; it gives eval/loss"));
  CHECK_FALSE(fs::exists(dir / "run"));
}

TEST_CASE("a run refuses console_metrics it does not log, or that the step line always shows", "[bad_inputs][config]") {
  const fs::path dir = testing::fresh_test_dir("bad_console_metrics");
  const fs::path train = testing::write_text_file(dir, "train.jsonl", kExamples);
  const auto validate = [&](const std::string& metrics) {
    const fs::path config = write_eval_config(dir, train, train, "[logging]\nconsole_metrics = " + metrics + "\n");
    return testing::run_ptrain("validate -c " + config.string() + " 2>&1");
  };
  const testing::CommandResult unknown = validate("[\"token_accuracy\", \"kl\"]");
  INFO(unknown.output);
  CHECK(unknown.exit_code == 2);
  CHECK(testing::contains(unknown.output,
                          "eval.toml: key 'logging.console_metrics': \"kl\" is not a metric of this "
                          "run; it logs units, tokens"));
  CHECK(testing::contains(unknown.output, "eval/token_accuracy"));
  const testing::CommandResult always = validate("[\"loss\"]");
  CHECK(always.exit_code == 2);
  CHECK(testing::contains(always.output, "\"loss\" is always on the step line"));
  const testing::CommandResult fine = validate("[\"token_accuracy\", \"eval/loss\", \"mfu\"]");
  INFO(fine.output);
  CHECK(fine.exit_code == 0);
}

TEST_CASE("validate refuses bad eval.rewards settings naming the key, the file or file:line",
          "[bad_inputs][config][eval][generate]") {
  const fs::path dir = testing::fresh_test_dir("bad_eval_rewards");
  const fs::path train = testing::write_text_file(dir, "train.jsonl", kExamples);
  struct Case {
    const char* name;
    std::string extra;
    fs::path eval;
    std::string expected;
  };
  const std::vector<Case> cases{
      {"an unknown reward", "rewards = [\"acuracy\"]\n", train,
       "key 'eval.rewards': acuracy: unknown reward function 'acuracy' (the built-in ones: accuracy, format, length, "
       "closeness)"},
      {"a reward twice", "rewards = [\"accuracy\", \"accuracy\"]\n", train, "a second reward named 'accuracy'"},
      {"a Python reward without its function", "rewards = [\"python:r.py\"]\n", train,
       "'python:r.py': expected python:FILE.py:FUNCTION"},
      {"no answer to compare with", "rewards = [\"accuracy\"]\nanswer_field = \"solution\"\n", train,
       train.string() + ":1: no field 'solution', which the accuracy and closeness rewards compare with"},
      {"no new tokens", "rewards = [\"accuracy\"]\nmax_new_tokens = 0\n", train, "eval.max_new_tokens"},
      {"a negative temperature", "rewards = [\"accuracy\"]\ntemperature = -0.5\n", train, "eval.temperature"},
      {"no generations", "rewards = [\"accuracy\"]\nnum_generations = 0\n", train, "eval.num_generations"},
      {"generation settings without rewards", "temperature = 0.7\n", train,
       "key 'eval.temperature' only applies to evaluation by generation (eval.rewards), but 'eval.rewards' = []"},
  };
  for (const Case& bad : cases) {
    DYNAMIC_SECTION(bad.name) {
      const fs::path config = write_eval_config(dir, train, bad.eval, bad.extra);
      const testing::CommandResult result = testing::run_ptrain("validate -c " + config.string() + " 2>&1");
      INFO(result.output);
      CHECK(result.exit_code == 2);
      CHECK(testing::contains(result.output, bad.expected));
    }
  }
}

TEST_CASE("eval.rewards without eval.data, and a best_metric of a reward not scored, are refused",
          "[bad_inputs][config][eval][generate]") {
  const fs::path dir = testing::fresh_test_dir("bad_eval_rewards_data");
  const fs::path train = testing::write_text_file(dir, "train.jsonl", kExamples);
  const fs::path no_data = dir / "no_data.toml";
  std::ofstream(no_data) << "plugin = \"sft\"\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                         << "[model]\nvocab_size = 259\nhidden_size = 16\nintermediate_size = 32\nnum_layers = 1\n"
                         << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                         << "[data]\ntrain = \"" << train.string() << "\"\nmax_length = 16\n"
                         << "[batch]\nglobal_size = 2\n[train]\nmax_steps = 1\n"
                         << "[eval]\nrewards = [\"accuracy\"]\n";
  const testing::CommandResult without = testing::run_ptrain("validate -c " + no_data.string() + " 2>&1");
  INFO(without.output);
  CHECK(without.exit_code == 2);
  CHECK(testing::contains(without.output, "no_data.toml:19: key 'eval.rewards' needs eval.data"));

  const fs::path config = write_eval_config(
      dir, train, train, "rewards = [\"accuracy\"]\n[checkpoint]\nbest_metric = \"eval/closeness\"\nbest_mode = \"max\"\n");
  const testing::CommandResult other = testing::run_ptrain("validate -c " + config.string() + " 2>&1");
  INFO(other.output);
  CHECK(other.exit_code == 2);
  CHECK(testing::contains(other.output, "\"eval/closeness\" is not a metric of the plugin's evaluation; it gives "
                                        "eval/loss, eval/token_accuracy"));
  CHECK(testing::contains(other.output, "eval/accuracy"));
}
