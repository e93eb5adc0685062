// The `ptrain` executable end to end: train, validate, plugins, errors and exit codes.
#include "catch.h"

#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "support/run_command.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

using ptrain::testing::CommandResult;
using ptrain::testing::run_command;
using ptrain::testing::run_ptrain;

fs::path fresh_dir(const std::string& name) { return ptrain::testing::fresh_test_dir("e2e_" + name); }

// A config small enough to train in seconds on the bundled arithmetic data.
fs::path write_config(const fs::path& dir, const std::string& extra_module = "",
                      const std::string& file_name = "sft_small.toml") {
  const fs::path path = dir / file_name;
  std::ofstream(path) << "plugin = \"sft\"\n"
                      << "seed = 1\n"
                      << "output_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 16\nmicro_size = 8\n"
                      << "[optim]\nlr = 3e-3\n"
                      << "[schedule]\nname = \"constant\"\nwarmup_steps = 3\n"
                      << "[train]\nmax_steps = 40\nlog_every = 10\n"
                      << "[checkpoint]\nevery_steps = 15\nkeep_last = 1\n"
                      << "[module]\nloss_agg = \"token_mean\"\n"
                      << extra_module;
  return path;
}

double mean_loss(const std::vector<nlohmann::json>& lines, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += lines[i]["loss"].get<double>();
  return sum / static_cast<double>(end - begin);
}

}  // namespace

TEST_CASE("ptrain train fine-tunes, logs falling loss, and writes a loadable model", "[e2e]") {
  const fs::path dir = fresh_dir("train");
  const fs::path config = write_config(dir);
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("step 40/40"));

  const fs::path run = dir / "run";
  const auto lines = ptrain::testing::read_metrics_jsonl(run / "metrics.jsonl");
  REQUIRE(lines.size() == 40);
  for (const char* key : {"loss", "grad_norm", "lr", "units", "tokens", "tokens_per_s", "step_s", "mfu",
                          "skipped_steps", "token_accuracy", "trainable_tokens"}) {
    INFO("metric " << key);
    CHECK(lines.back().contains(key));
  }
  CHECK(lines.front()["step"] == 1);
  CHECK(lines.back()["skipped_steps"] == 0);
  // The step-phase timers at log steps (every 10th): each phase's seconds per
  // step, adding up to no more than the steps took (eval and checkpoints included).
  CHECK_FALSE(lines.front().contains("time/forward_s"));
  for (const size_t log_step : {10, 20, 30, 40}) {
    const nlohmann::json& line = lines[log_step - 1];
    INFO("step " << log_step << ": " << line.dump());
    double phases_s = 0.0;
    for (const char* phase : {"data", "forward", "loss_head", "backward", "collectives", "optimizer", "eval",
                              "checkpoint", "other"}) {
      const std::string key = std::string("time/") + phase + "_s";
      REQUIRE(line.contains(key));
      CHECK(line[key].get<double>() >= 0.0);
      phases_s += line[key].get<double>();
    }
    CHECK(line["time/forward_s"].get<double>() > 0.0);
    CHECK(line["time/loss_head_s"].get<double>() > 0.0);
    CHECK(line["time/backward_s"].get<double>() > 0.0);
    CHECK(line["time/optimizer_s"].get<double>() > 0.0);
    // The phases cover the steps' own time (step_s) and what runs between them.
    double steps_s = 0.0;
    for (size_t step = log_step - 9; step <= log_step; ++step) steps_s += lines[step - 1]["step_s"].get<double>();
    CHECK(phases_s * 10 >= 0.99 * steps_s);
  }
  CHECK_FALSE(lines[14].contains("time/checkpoint_s"));                 // not a log step
  CHECK(lines[19]["time/checkpoint_s"].get<double>() > 0.0);            // step 15's checkpoint, logged at 20
  CHECK_THAT(result.output, Catch::Contains("[timing] steps 31-40, per step: data "));
  const double early = mean_loss(lines, 0, 5);
  const double late = mean_loss(lines, 35, 40);
  INFO("mean loss of steps 1-5: " << early << ", of steps 36-40: " << late);
  CHECK(late < 0.6 * early);

  CHECK(fs::exists(run / "config.toml"));
  CHECK(fs::exists(run / "log_rank0.txt"));
  // Checkpoints at 15 and 30 and at the end; keep_last = 1 keeps the last.
  CHECK(fs::exists(run / "checkpoints" / "step_40" / "manifest.json"));
  CHECK_FALSE(fs::exists(run / "checkpoints" / "step_30"));
  CHECK_FALSE(fs::exists(run / "checkpoints" / "step_15"));

  const auto model = ptrain::model::CausalLm::load_hf_dir(run / "final");
  CHECK(model->config().hidden_size == 64);
  const at::Tensor logits = model->logits(at::tensor({256, '1', '+', '1', '='}, at::kLong).view({1, 5}));
  CHECK(logits.sizes() == at::IntArrayRef({1, 5, 259}));
  CHECK(at::isfinite(logits).all().item<bool>());

  // The resolved config trains again as written (and the run dir is protected).
  const CommandResult refused = run_ptrain("train -c " + (run / "config.toml").string());
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("already holds a run; pass --resume auto to continue it, --overwrite"));
  const CommandResult validated = run_ptrain("validate -c " + (run / "config.toml").string());
  INFO(validated.output);
  CHECK(validated.exit_code == 0);
}

TEST_CASE("ptrain validate checks everything without training", "[e2e]") {
  const fs::path dir = fresh_dir("validate");
  const fs::path config = write_config(dir);
  const CommandResult ok = run_ptrain("validate -c " + config.string());
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.output, Catch::Contains("config OK"));
  CHECK_THAT(ok.output, Catch::Contains("4000 examples"));
  CHECK_FALSE(fs::exists(dir / "run"));
  // The plugin's path as typed from where ptrain runs: relative beneath it, else absolute.
  const fs::path build_dir = fs::path(PTRAIN_EXE).parent_path().parent_path();
  const std::string validate = std::string(PTRAIN_EXE) + " validate -c " + config.string();
  CHECK_THAT(run_command("cd " + build_dir.string() + " && " + validate).output,
             Catch::Contains("(lib/ptrain/plugins/libptrain_plugin_sft.so)"));
  CHECK_THAT(run_command("cd " + dir.string() + " && " + validate).output,
             Catch::Contains("(" + (build_dir / "lib/ptrain/plugins/libptrain_plugin_sft.so").string() + ")"));

  const CommandResult bad_key = run_ptrain("validate -c " + config.string() + " --set optim.lrr=1e-3");
  CHECK(bad_key.exit_code == 2);
  CHECK_THAT(bad_key.output, Catch::Contains("optim.lrr"));

  const fs::path bad_module_config = write_config(dir, "norm_constnt = 3.0\n", "bad_module.toml");
  const CommandResult bad_module = run_ptrain("validate -c " + bad_module_config.string());
  CHECK(bad_module.exit_code == 2);
  CHECK_THAT(bad_module.output, Catch::Contains(bad_module_config.string() + ":31"));
  CHECK_THAT(bad_module.output, Catch::Contains("norm_constant"));

  const fs::path bad_data = dir / "bad.jsonl";
  std::ofstream(bad_data) << "{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n{\"prompt\": \"2+2=\"}\n";
  const CommandResult data_error =
      run_ptrain("validate -c " + config.string() + " --set data.train=\"" + bad_data.string() + "\"");
  CHECK(data_error.exit_code == 2);  // bad input, as a bad config
  CHECK_THAT(data_error.output, Catch::Contains(bad_data.string() + ":2: missing field 'completion'"));

  // The held-out set ([eval] data) is checked the same way.
  const CommandResult eval_error =
      run_ptrain("validate -c " + config.string() + " --set eval.data=\"" + bad_data.string() + "\"");
  CHECK(eval_error.exit_code == 2);
  CHECK_THAT(eval_error.output, Catch::Contains(bad_data.string() + ":2: missing field 'completion'"));
  const CommandResult eval_ok =
      run_ptrain("validate -c " + config.string() + " --set eval.data=\"" + std::string(PTRAIN_SOURCE_DIR) +
                 "/data/arith/train.jsonl\" --set eval.max_examples=40 --set eval.every_steps=10");
  INFO(eval_ok.output);
  CHECK(eval_ok.exit_code == 0);
  CHECK_THAT(eval_ok.output, Catch::Contains("eval       40 held-out examples in ") &&
                                 Catch::Contains("every 10 steps and after the last"));
}

TEST_CASE("help, version, plugins and usage errors", "[e2e]") {
  const CommandResult help = run_ptrain("--help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("validate"));
  const CommandResult train_help = run_ptrain("train --help");
  CHECK(train_help.exit_code == 0);
  CHECK_THAT(train_help.output, Catch::Contains("--set"));
  // -h/--help is listed under its command's options heading, never above it.
  for (const auto& [command, heading] : {std::pair<const char*, const char*>{"tokenize", "\noptions:\n"},
                                         {"train", "\nconfig options:\n"},
                                         {"report", "\noptions:\n"}}) {
    const CommandResult command_help = run_ptrain(std::string(command) + " --help");
    INFO(command_help.output);
    CHECK(command_help.exit_code == 0);
    const size_t heading_at = command_help.output.find(heading);
    const size_t help_at = command_help.output.find("-h [ --help ]");
    CHECK((heading_at != std::string::npos && help_at != std::string::npos && heading_at < help_at));
  }
  const CommandResult version = run_ptrain("--version");
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Catch::Contains("SDK ABI"));
  const CommandResult plugins = run_ptrain("plugins");
  CHECK(plugins.exit_code == 0);
  CHECK_THAT(plugins.output, Catch::Contains("sft 0.1.0"));
  const CommandResult unknown = run_ptrain("trian");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("unknown command 'trian'"));
  const CommandResult no_config = run_ptrain("train");
  CHECK(no_config.exit_code == 2);
  const CommandResult missing_file = run_ptrain("train -c /nonexistent.toml");
  CHECK(missing_file.exit_code == 2);
  CHECK_THAT(missing_file.output, Catch::Contains("/nonexistent.toml"));
}

TEST_CASE("docs/config.md is what the schemas say", "[e2e]") {
  std::ifstream doc(std::string(PTRAIN_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(doc);
  const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  const std::string marker = "<!-- generated: ptrain schema";
  const size_t at = text.find(marker);
  REQUIRE(at != std::string::npos);
  const size_t arguments_end = text.find(" -->", at);
  const std::string arguments = text.substr(at + marker.size(), arguments_end - at - marker.size());
  const CommandResult generated = run_ptrain("schema" + arguments);
  REQUIRE(generated.exit_code == 0);
  const std::string committed = text.substr(text.find('\n', arguments_end) + 2);
  INFO("regenerate with scripts/make_config_doc.sh");
  CHECK(committed == generated.output);
}
