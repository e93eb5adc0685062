// The `ptrain` executable running the DPO plugin end to end: a tiny model
// learns the bundled arithmetic preferences, the reference cache is written
// and reused, and bad preference data is refused.
#include "catch.h"

#include "support/test_util.h"

#include "support/run_command.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

namespace fs = std::filesystem;

namespace {

using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

fs::path fresh_dir(const std::string& name) { return ptrain::testing::fresh_test_dir("dpo_e2e_" + name); }

// The first 256 pairs of the bundled preference data, so that precomputing
// the reference stays cheap.
fs::path write_data_subset(const fs::path& dir) {
  const fs::path path = dir / "prefs.jsonl";
  std::ifstream in(std::string(PTRAIN_SOURCE_DIR) + "/data/arith_prefs/train.jsonl");
  std::ofstream out(path);
  std::string line;
  for (int count = 0; count < 256 && std::getline(in, line); ++count) out << line << '\n';
  return path;
}

// DPO from a random tiny model (its frozen copy is the reference).
fs::path write_config(const fs::path& dir, const std::string& module_lines) {
  const fs::path path = dir / "dpo_small.toml";
  std::ofstream(path) << "plugin = \"dpo\"\n"
                      << "seed = 3\n"
                      << "output_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << write_data_subset(dir).string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 16\nmicro_size = 6\n"
                      << "[optim]\nlr = 2e-3\n"
                      << "[schedule]\nname = \"constant\"\nwarmup_steps = 2\n"
                      << "[train]\nmax_steps = 30\nlog_every = 10\n"
                      << "[module]\n"
                      << module_lines;
  return path;
}

double mean_of(const std::vector<nlohmann::json>& lines, const char* key, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += lines[i][key].get<double>();
  return sum / static_cast<double>(end - begin);
}

}  // namespace

TEST_CASE("ptrain trains DPO with a precomputed reference, and margins and accuracy rise", "[e2e][dpo][device]") {
  const fs::path dir = fresh_dir("train");
  const fs::path cache = dir / "reference_logps.json";
  const fs::path config = write_config(dir,
                                       "loss = [\"sigmoid\", \"sft\"]\nloss_weights = [1, 0.1]\nbeta = 0.5\n"
                                       "precompute_reference = true\nreference_cache = \"" +
                                           cache.string() + "\"\n");
  const CommandResult result = run_ptrain("train -c " + config.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("computed reference log-probs of 256 pairs"));
  CHECK(fs::exists(cache));

  const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(lines.size() == 30);
  for (const char* key : {"loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracy",
                          "logps/chosen", "logps/rejected", "loss/sigmoid", "loss/sft", "truncated_pairs"}) {
    INFO("metric " << key);
    CHECK(lines.back().contains(key));
  }
  CHECK(lines.front()["units"] == 16);  // one unit per pair
  const double early_margin = mean_of(lines, "rewards/margins", 0, 3);
  const double late_margin = mean_of(lines, "rewards/margins", 25, 30);
  const double late_accuracy = mean_of(lines, "rewards/accuracy", 25, 30);
  INFO("margins " << early_margin << " → " << late_margin << ", late accuracy " << late_accuracy);
  CHECK(late_margin > early_margin);
  CHECK(late_margin > 0.0);

  // Same model and data: the cache is reused, not recomputed.
  const CommandResult again =
      run_ptrain("train --overwrite -c " + config.string() +
                 " --set train.max_steps=2 --set schedule.warmup_steps=1 --set train.log_every=1");
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("reused reference log-probs of 256 pairs"));

  // Another dataset: the cache is refused.
  const fs::path other_data = dir / "other.jsonl";
  std::ofstream(other_data) << "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n"
                            << "{\"prompt\": \"2+2=\", \"chosen\": \"4\", \"rejected\": \"5\"}\n";
  const CommandResult refused = run_ptrain(
      "train --overwrite -c " + config.string() + " --set data.train=\"" + other_data.string() +
      "\" --set batch.global_size=2 --set train.max_steps=2 --set schedule.warmup_steps=1 --set train.log_every=1");
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.output, Catch::Contains("another dataset"));
}

TEST_CASE("ptrain validate refuses bad preference data and lists the dpo plugin", "[e2e][dpo]") {
  const fs::path dir = fresh_dir("validate");
  const fs::path config = write_config(dir, "loss = \"sigmoid\"\n");
  const CommandResult ok = run_ptrain("validate -c " + config.string());
  INFO(ok.output);
  CHECK(ok.exit_code == 0);

  // Chat pairs are valid with the byte tokenizer's plain template; a bad role is not.
  const auto validate_chat = [&](const std::string& name, const std::string& rejected_role) {
    const fs::path data = dir / name;
    std::ofstream(data) << "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n"
                        << "{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                           "\"chosen\": [{\"role\": \"assistant\", \"content\": \"a\"}], "
                           "\"rejected\": [{\"role\": \""
                        << rejected_role << "\", \"content\": \"b\"}]}\n";
    return std::pair{data, run_ptrain("validate -c " + config.string() +
                                      " --set batch.global_size=2 --set data.train=\"" + data.string() + "\"")};
  };
  const auto [chat_data, chat] = validate_chat("chat.jsonl", "assistant");
  INFO(chat.output);
  CHECK(chat.exit_code == 0);
  const auto [bad_data, bad_chat] = validate_chat("bad_chat.jsonl", "bot");
  CHECK(bad_chat.exit_code == 2);
  CHECK_THAT(bad_chat.output, Catch::Contains(bad_data.string() + ":2: field 'rejected[0].role': unknown role"));

  // module.loss is a TOML array; an unknown element names its index and line.
  const fs::path bad_loss = write_config(dir, "loss = [\"sigmoid\",\n  \"dpo\"]\n");
  const CommandResult unknown = run_ptrain("validate -c " + bad_loss.string());
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("dpo_small.toml:28: key 'module.loss[1]': expected one of") &&
                                 Catch::Contains("got \"dpo\""));
  const fs::path bad_weight = write_config(dir, "loss = [\"sigmoid\", \"sft\"]\nloss_weights = [1, \"x\"]\n");
  const CommandResult weight = run_ptrain("validate -c " + bad_weight.string());
  CHECK(weight.exit_code == 2);
  CHECK_THAT(weight.output, Catch::Contains("dpo_small.toml:28: key 'module.loss_weights[1]': expected a float"));

  const CommandResult plugins = run_ptrain("plugins");
  CHECK_THAT(plugins.output, Catch::Contains("dpo 0.1.0"));
}
