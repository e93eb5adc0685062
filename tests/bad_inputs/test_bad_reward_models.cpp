// GRPO reward_models that cannot be used: `ptrain validate` refuses each
// before training, naming the config's file:line and key, then the reward
// model's file and the key or tensor at fault; bad combinations of the
// reward keys are config errors naming file:line and key.
#include "catch.h"

#include "bad_inputs/grpo_validate_config.h"
#include "bad_inputs/rejection.h"
#include "support/reward_model_dir.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/checkpoint/remove_tree.h"
#include "core/config/config_loader.h"
#include "grpo_config.h"
#include "ptrain/sdk/config_schema.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ptrain::testing::TinyRewardModelOptions;

namespace {

struct ModelCase {
  const char* name;
  std::function<void(TinyRewardModelOptions&)> change;  // which part of the tiny model breaks
  std::function<void(const fs::path&)> after;           // or a change to the written directory
  int exit_code;                                        // 1: a model error, 2: a config error
  std::string file;                                     // the reward model's file the message names
  std::string expected;
};

void no_change(TinyRewardModelOptions&) {}
void no_edit(const fs::path&) {}

}  // namespace

TEST_CASE("unusable reward models are refused before training, naming the file and the key or tensor",
          "[bad_inputs][reward_model]") {
  const std::vector<ModelCase> cases = {
      {"no directory", no_change, [](const fs::path& dir) { ptrain::checkpoint::remove_tree(dir); }, 1, "",
       ": reward model directory does not exist"},
      {"no score head", [](TinyRewardModelOptions& o) { o.score_rows = 0; }, no_edit, 1, "",
       ": tensor 'score.weight' is missing (expected shape [1, 32]"},
      {"two labels by id2label",
       [](TinyRewardModelOptions& o) {
         o.config_fields = {{"id2label", {{"0", "A"}, {"1", "B"}}}};
       },
       no_edit, 1, "config.json", ": key 'num_labels': a reward model has one label (one score), got 2"},
      {"three labels by num_labels",
       [](TinyRewardModelOptions& o) {
         o.config_fields = {{"num_labels", 3}};
       },
       no_edit, 1, "config.json", ": key 'num_labels': a reward model has one label (one score), got 3"},
      {"a score head of two rows", [](TinyRewardModelOptions& o) { o.score_rows = 2; }, no_edit, 1, "",
       ": tensor 'score.weight' has shape [2, 32], expected [1, 32]"},
      {"a causal LM",
       [](TinyRewardModelOptions& o) {
         o.config_fields = {{"architectures", {"LlamaForCausalLM"}}};
       },
       no_edit, 1, "config.json", ": key 'architectures': expected a sequence-classification model"},
      {"a pad_token_id that is no id",
       [](TinyRewardModelOptions& o) {
         o.config_fields = {{"pad_token_id", "x"}};
       },
       no_edit, 1, "config.json", ": key 'pad_token_id': expected a token id or null"},
      {"no tokenizer", [](TinyRewardModelOptions& o) { o.tokenizer = false; }, no_edit, 2, "tokenizer.json",
       ": no such file (a reward model scores text with its own tokenizer"},
      {"no chat template", [](TinyRewardModelOptions& o) { o.chat_template = false; }, no_edit, 2,
       "tokenizer_config.json", ": no chat_template"},
      {"an lm_head besides the score head", [](TinyRewardModelOptions& o) { o.extra_tensor = "lm_head.weight"; },
       no_edit, 1, "", ": unexpected tensor 'lm_head.weight' for a sequence classifier"},
  };
  for (const ModelCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path dir = ptrain::testing::fresh_test_dir("bad_reward_model");
      const fs::path model_dir = dir / "rm";
      TinyRewardModelOptions options;
      c.change(options);
      ptrain::testing::write_tiny_reward_model(model_dir, options);
      c.after(model_dir);
      const fs::path config =
          ptrain::testing::write_grpo_validate_config(dir, "reward_models = [\"" + model_dir.string() + "\"]");
      const ptrain::testing::CommandResult result = ptrain::testing::run_ptrain("validate -c " + config.string());
      INFO(result.output);
      CHECK(result.exit_code == c.exit_code);
      const std::string named = c.file.empty() ? model_dir.string() : (model_dir / c.file).string();
      CHECK_THAT(result.output,
                 Catch::Contains(config.string() + ":18: key 'module.reward_models': " + named + c.expected));
    }
  }
}

TEST_CASE("bad reward_models entries and weights name file:line and key", "[bad_inputs][config][reward_model]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("bad_reward_model_keys");
  const std::string head =
      "plugin = \"grpo\"\n[data]\ntrain = \"train.jsonl\"\n[batch]\nglobal_size = 8\n"
      "[train]\nmax_steps = 10\n[module]\n";  // 8 lines: the module's keys start at line 9
  struct KeyCase {
    const char* name;
    std::string module;
    std::string location;
    std::string message;
  };
  const std::vector<KeyCase> cases = {
      {"an empty entry", "reward_models = [\"\"]\n", ":9: key 'module.reward_models'", "an entry is empty"},
      {"a directory listed twice", "reward_models = [\"m/rm\", \"m/rm\"]\n", ":9: key 'module.reward_models'",
       "'m/rm' is listed twice"},
      {"a name another reward has", "reward_funcs = [\"accuracy\"]\nreward_models = [\"models/accuracy/\"]\n",
       ":10: key 'module.reward_models'", "would be named 'accuracy' (its metrics rewards/accuracy/...)"},
      {"two models of one name", "reward_models = [\"a/rm\", \"b/rm\"]\n", ":9: key 'module.reward_models'",
       "would be named 'rm'"},
      {"a directory without a name", "reward_models = [\"/\"]\n", ":9: key 'module.reward_models'",
       "names no directory the reward can be named after"},
      {"one weight for two rewards",
       "reward_funcs = [\"accuracy\"]\nreward_models = [\"m/rm\"]\nreward_weights = [1]\n",
       ":11: key 'module.reward_weights'",
       "expected 2 weights (one per reward function in reward_funcs, then one per "
       "reward model in reward_models), got 1"},
      {"no reward at all", "reward_funcs = []\n", ":9: key 'module.reward_funcs'",
       "expected at least one reward function (or a reward model in module.reward_models)"},
  };
  ptrain::sdk::ConfigSchema schema;
  ptrain::grpo::declare_grpo_config(schema);
  for (const KeyCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = ptrain::testing::write_text_file(dir, "grpo.toml", head + c.module);
      const ptrain::testing::Rejection rejection = ptrain::testing::rejection_of(
          [&] { ptrain::grpo::read_grpo_config(ptrain::config::load_run_config(file, {}, schema).module); });
      INFO(rejection.message);
      CHECK(rejection.kind == "ConfigError");
      CHECK_THAT(rejection.message, Catch::Contains(file.string() + c.location));
      CHECK_THAT(rejection.message, Catch::Contains(c.message));
    }
  }
  SECTION("reward models alone, or after reward functions with a weight each, are accepted") {
    for (const std::string module : {"reward_funcs = []\nreward_models = [\"m/rm\"]\n",
                                     "reward_models = [\"m/rm/\"]\nreward_weights = [1, 0.5, 2]\n"}) {
      const fs::path file = ptrain::testing::write_text_file(dir, "grpo.toml", head + module);
      const ptrain::grpo::GrpoConfig config =
          ptrain::grpo::read_grpo_config(ptrain::config::load_run_config(file, {}, schema).module);
      CHECK(config.reward_names.back() == "rm");
      CHECK(config.reward_weights.size() == config.reward_names.size());
    }
  }
}
