// The `ptrain` executable running the KTO plugin end to end: a tiny model
// learns from the bundled unpaired answers (desirable rewards rise above the
// undesirable ones), its z0 and reference forwards count in the throughput,
// the console shows the metrics [logging] names, the bundled config
// validates, and bad KTO data is refused as bad input.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/causal_lm.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fs = std::filesystem;

namespace {

using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

fs::path fresh_dir(const std::string& name) { return ptrain::testing::fresh_test_dir("kto_e2e_" + name); }

// The first `count` lines of the bundled KTO data.
fs::path write_data_subset(const fs::path& dir, int count) {
  const fs::path path = dir / "kto.jsonl";
  std::ifstream in(std::string(PTRAIN_SOURCE_DIR) + "/data/arith_kto/train.jsonl");
  std::ofstream out(path);
  std::string line;
  for (int i = 0; i < count && std::getline(in, line); ++i) out << line << '\n';
  return path;
}

// KTO from a random tiny model (its frozen copy is the reference), two ranks' worth of microbatches.
fs::path write_config(const fs::path& dir) {
  const fs::path path = dir / "kto_small.toml";
  std::ofstream(path) << "plugin = \"kto\"\n"
                      << "seed = 3\n"
                      << "output_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << write_data_subset(dir, 128).string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 16\nmicro_size = 6\n"
                      << "[optim]\nlr = 2e-3\n"
                      << "[schedule]\nname = \"constant\"\nwarmup_steps = 2\n"
                      << "[train]\nmax_steps = 30\nlog_every = 10\n"
                      << "[logging]\nconsole_metrics = [\"kl\", \"rewards/chosen\"]\n"
                      << "[module]\nbeta = 0.5\n";
  return path;
}

double mean_of(const std::vector<nlohmann::json>& lines, const char* key, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += lines[i][key].get<double>();
  return sum / static_cast<double>(end - begin);
}

}  // namespace

TEST_CASE("ptrain trains KTO: desirable rewards rise above undesirable ones, z0 counted in the throughput",
          "[e2e][kto]") {
  const fs::path dir = fresh_dir("train");
  const CommandResult result = run_ptrain("train -c " + write_config(dir).string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("64 desirable and 64 undesirable examples"));
  CHECK_THAT(result.output, Catch::Contains("| kl ") && Catch::Contains("| rewards/chosen "));

  const auto lines = ptrain::testing::read_metrics_jsonl(dir / "run" / "metrics.jsonl");
  REQUIRE(lines.size() == 30);
  for (const char* key : {"loss", "kl", "rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected",
                          "desirable", "undesirable", "forward_tokens"}) {
    INFO("metric " << key);
    CHECK(lines.back().contains(key));
  }
  for (const nlohmann::json& line : lines) {
    CHECK(line["units"] == 16);  // one unit per example
    CHECK(line["desirable"].get<double>() + line["undesirable"].get<double>() == 16.0);
    // Each example's KL pair through the policy and the reference, and the example through the
    // reference: three forwards without gradients. Rotating completions within the batch keeps the
    // batch's token count, and nothing here is cut at max_length, so exactly three times its tokens.
    CHECK(line["forward_tokens"].get<double>() == 3.0 * line["tokens"].get<double>());
    const double per_second =
        (line["tokens"].get<double>() + line["forward_tokens"].get<double>()) / line["step_s"].get<double>();
    CHECK(line["tokens_per_s"].get<double>() == Approx(per_second).epsilon(1e-9));
  }
  const double early = mean_of(lines, "rewards/chosen", 0, 5) - mean_of(lines, "rewards/rejected", 0, 5);
  const double late = mean_of(lines, "rewards/chosen", 25, 30) - mean_of(lines, "rewards/rejected", 25, 30);
  INFO("reward gap " << early << " → " << late);
  CHECK(late > early);
  CHECK(late > 0.0);
  CHECK(mean_of(lines, "kl", 25, 30) > 0.0);  // the policy has moved from its reference
}

TEST_CASE("the bundled KTO config validates, and bad KTO data is bad input", "[e2e][kto]") {
  const fs::path dir = fresh_dir("validate");
  const fs::path model_dir = dir / "sft_final";
  ptrain::model::CausalLm::init_random(ptrain::testing::tiny_model_config(), 1)->save_hf_dir(model_dir);
  const std::string source = PTRAIN_SOURCE_DIR;
  const std::string bundled = "validate -c " + source + "/configs/kto.toml --set model.init=\"" + model_dir.string() +
                              "\" --set output_dir=\"" + (dir / "run").string() + "\"";
  const std::string bundled_data = " --set data.train=\"" + source + "/data/arith_kto/train.jsonl\"";
  const CommandResult ok = run_ptrain(bundled + bundled_data);
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.output, Catch::Contains("512 examples"));

  const fs::path bad = dir / "bad.jsonl";
  std::ofstream(bad) << "{\"prompt\": \"1+1=\", \"completion\": \"2\", \"label\": true}\n"
                     << "{\"prompt\": \"1+1=\", \"completion\": \"3\", \"label\": \"no\"}\n";
  const CommandResult refused = run_ptrain(bundled + " --set data.train=\"" + bad.string() + "\"");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output,
             Catch::Contains(bad.string() + ":2: field 'label': expected true or false, got string \"no\""));
}
