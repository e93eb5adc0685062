// Bad TOML configs and --set overrides: each is a ConfigError (UsageError for
// a malformed --set) naming file:line and the key.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/config/config_loader.h"
#include "ptrain/sdk/config_schema.h"

#include <filesystem>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

// The smallest valid config; line numbers below count from its first line.
const std::string kMinimal =
    "plugin = \"sft\"\n"         // 1
    "[data]\n"                   // 2
    "train = \"train.jsonl\"\n"  // 3
    "[batch]\n"                  // 4
    "global_size = 8\n"          // 5
    "[train]\n"                  // 6
    "max_steps = 10\n";          // 7 (appended text starts at line 8)

// A plugin schema with a required key, as a plugin may declare.
sdk::ConfigSchema module_schema() {
  sdk::ConfigSchema schema;
  schema.add_string("reward", std::nullopt, "reward function").required();
  schema.add_float("beta", 0.1, "KL coefficient", 0.0);
  return schema;
}
const std::string kModule = "[module]\nreward = \"exact\"\n";

struct ConfigCase {
  const char* name;
  std::string toml;
  std::vector<std::string> overrides;
  const char* kind;
  std::string location;  // appended to the file path unless it starts with "--set"
};

}  // namespace

TEST_CASE("bad configs are rejected naming file:line and key", "[bad_inputs][config]") {
  const fs::path dir = testing::fresh_test_dir("bad_config");
  const std::vector<ConfigCase> cases = {
      {"unknown key",
       kMinimal + kModule + "micro_szie = 2\n",
       {},
       "ConfigError",
       ":10: unknown key 'module.micro_szie'"},
      {"unknown key in a core section",
       kMinimal + "lr = 1e-5\n" + kModule,
       {},
       "ConfigError",
       ":8: unknown key 'train.lr'"},
      {"unknown section",
       kMinimal + kModule + "[optimizer]\nlr = 1\n",
       {},
       "ConfigError",
       ":10: unknown section [optimizer]"},
      {"duplicate key", kMinimal + "max_steps = 5\n" + kModule, {}, "ConfigError", ":8:"},
      {"duplicate table", kMinimal + kModule + "[batch]\nmicro_size = 2\n", {}, "ConfigError", ":10:"},
      {"string for a float",
       kMinimal + kModule + "[optim]\nlr = \"abc\"\n",
       {},
       "ConfigError",
       ":11: key 'optim.lr': expected a float"},
      {"float for an integer",
       kMinimal + kModule + "[model]\nnum_layers = 2.5\n",
       {},
       "ConfigError",
       ":11: key 'model.num_layers': expected an integer"},
      {"integer for a bool",
       kMinimal + kModule + "[model]\nattention_bias = 1\n",
       {},
       "ConfigError",
       ":11: key 'model.attention_bias': expected a bool"},
      {"array for a string",
       kMinimal + kModule + "[optim]\nname = [\"sgd\"]\n",
       {},
       "ConfigError",
       ":11: key 'optim.name'"},
      {"section written as a value", "model = 3\n" + kMinimal + kModule, {}, "ConfigError", ":1: 'model' is a section"},
      {"below the minimum",
       kMinimal + kModule + "[checkpoint]\nkeep_last = 0\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.keep_last': must be >= 1"},
      {"above the maximum",
       kMinimal + kModule + "[schedule]\nmin_lr_ratio = 1.5\n",
       {},
       "ConfigError",
       ":11: key 'schedule.min_lr_ratio': must be <= 1"},
      {"exclusive bound",
       kMinimal + kModule + "[optim]\nlr = 0\n",
       {},
       "ConfigError",
       ":11: key 'optim.lr': must be > 0"},
      {"unknown sharding mode",
       kMinimal + kModule + "[distributed]\nsharding = \"zero3\"\n",
       {},
       "ConfigError",
       ":11: key 'distributed.sharding'"},
      {"unknown generation gather",
       kMinimal + kModule + "[distributed]\nsharding = \"full\"\ngeneration_gather = \"all\"\n",
       {},
       "ConfigError",
       ":12: key 'distributed.generation_gather'"},
      {"generation gather of the wrong type",
       kMinimal + kModule + "[distributed]\ngeneration_gather = true\n",
       {},
       "ConfigError",
       ":11: key 'distributed.generation_gather'"},
      {"sharding full with LoRA",
       kMinimal + kModule + "[distributed]\nsharding = \"full\"\n[lora]\nrank = 4\n",
       {},
       "ConfigError",
       ":11: 'distributed.sharding' = \"full\" ("},
      {"odd head_dim",
       kMinimal + kModule + "[model]\nhead_dim = 7\n",
       {},
       "ConfigError",
       ":11: 'model.head_dim' = 7 ("},
      {"negative head_dim",
       kMinimal + kModule + "[model]\nhead_dim = -2\n",
       {},
       "ConfigError",
       ":11: key 'model.head_dim': must be >= 0"},
      {"head_dim with init",
       kMinimal + kModule + "[model]\ninit = \"models/m\"\nhead_dim = 64\n",
       {},
       "ConfigError",
       ":11: key 'model.init' cannot be combined with 'model.head_dim'"},
      // An out-of-range value of a key the chosen optimizer ignores is
      // reported as out of range, not looked up again by the unused-key rule.
      {"out of range and unused by the optimizer",
       kMinimal + kModule + "[optim]\nmomentum = 5.9\n",
       {},
       "ConfigError",
       ":11: key 'optim.momentum': must be < 1"},
      {"nan", kMinimal + kModule + "[optim]\nlr = nan\n", {}, "ConfigError", ":11: key 'optim.lr': must be a finite"},
      {"inf", kMinimal + kModule + "[optim]\nlr = inf\n", {}, "ConfigError", ":11: key 'optim.lr'"},
      {"negative skip limit",
       kMinimal + "max_consecutive_skips = 0\n" + kModule,
       {},
       "ConfigError",
       ":8: key 'train.max_consecutive_skips'"},
      {"negative spike factor",
       kMinimal + "loss_spike_factor = -1.0\n" + kModule,
       {},
       "ConfigError",
       ":8: key 'train.loss_spike_factor'"},
      {"integer beyond int64",
       kMinimal + kModule + "[runtime]\nthreads = 99999999999999999999\n",
       {},
       "ConfigError",
       ":11:"},
      {"bad enum",
       kMinimal + kModule + "[optim]\nname = \"adam\"\n",
       {},
       "ConfigError",
       ":11: key 'optim.name': expected one of"},
      {"bad on_error",
       "plugin = \"sft\"\n[data]\ntrain = \"t\"\non_error = \"ignore\"\n[batch]\nglobal_size = 8\n"
       "[train]\nmax_steps = 1\n" +
           kModule,
       {},
       "ConfigError",
       ":4: key 'data.on_error': expected one of \"fail\", \"skip\""},
      {"unknown device",
       kMinimal + kModule + "[runtime]\ndevice = \"gpu\"\n",
       {},
       "ConfigError",
       ":11: key 'runtime.device': expected one of \"auto\", \"cpu\", \"cuda\""},
      {"device of the wrong type",
       kMinimal + kModule + "[runtime]\ndevice = 0\n",
       {},
       "ConfigError",
       ":11: key 'runtime.device'"},
      {"unknown precision",
       kMinimal + kModule + "[runtime]\nprecision = \"fp16\"\n",
       {},
       "ConfigError",
       ":11: key 'runtime.precision': expected one of \"fp32\", \"bf16-mixed\""},
      {"unknown save_dtype",
       kMinimal + kModule + "[checkpoint]\nsave_dtype = \"float16\"\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.save_dtype': expected one of \"auto\", \"float32\", \"bfloat16\""},
      {"max_shard_size without a unit",
       kMinimal + kModule + "[checkpoint]\nmax_shard_size = \"5\"\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.max_shard_size' = \"5\": expected a positive integer and a unit, like \"5GB\""},
      {"max_shard_size with a fraction",
       kMinimal + kModule + "[checkpoint]\nmax_shard_size = \"1.5GB\"\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.max_shard_size' = \"1.5GB\": expected a positive integer and a unit"},
      {"max_shard_size with an unknown unit",
       kMinimal + kModule + "[checkpoint]\nmax_shard_size = \"5XB\"\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.max_shard_size' = \"5XB\": expected a positive integer and a unit"},
      {"max_shard_size zero",
       kMinimal + kModule + "[checkpoint]\nmax_shard_size = \"0GB\"\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.max_shard_size' = \"0GB\": expected a positive integer and a unit"},
      {"max_shard_size a number",
       kMinimal + kModule + "[checkpoint]\nmax_shard_size = 5000000\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.max_shard_size'"},
      {"bad --set max_shard_size",
       kMinimal + kModule,
       {"checkpoint.max_shard_size=\"big\""},
       "ConfigError",
       "--set checkpoint.max_shard_size=\"big\": key 'checkpoint.max_shard_size' = \"big\": expected a positive "
       "integer and a unit"},
      {"unknown best_mode",
       kMinimal + kModule + "[checkpoint]\nbest_mode = \"lowest\"\n",
       {},
       "ConfigError",
       ":11: key 'checkpoint.best_mode': expected one of \"min\", \"max\""},
      {"best_metric that is no evaluation metric",
       kMinimal + kModule + "[eval]\ndata = \"e.jsonl\"\n[checkpoint]\nbest_metric = \"loss\"\n",
       {},
       "ConfigError",
       ":13: 'checkpoint.best_metric' = \"loss\""},
      {"best_metric without eval.data",
       kMinimal + kModule + "[checkpoint]\nbest_metric = \"eval/loss\"\n",
       {},
       "ConfigError",
       ":11: 'checkpoint.best_metric' = \"eval/loss\""},
      {"eval.every_steps without eval.data",
       kMinimal + kModule + "[eval]\nevery_steps = 2\n",
       {},
       "ConfigError",
       ":11: key 'eval.every_steps' needs eval.data"},
      {"eval.max_examples without eval.data",
       kMinimal + kModule + "[eval]\nmax_examples = 2\n",
       {},
       "ConfigError",
       ":11: key 'eval.max_examples' needs eval.data"},
      {"negative eval.every_steps",
       kMinimal + kModule + "[eval]\ndata = \"e.jsonl\"\nevery_steps = -1\n",
       {},
       "ConfigError",
       ":12: key 'eval.every_steps': must be >= 0"},
      {"eval.max_examples of 0",
       kMinimal + kModule + "[eval]\ndata = \"e.jsonl\"\nmax_examples = 0\n",
       {},
       "ConfigError",
       ":12: key 'eval.max_examples': must be >= 1"},
      {"eval.data of the wrong type",
       kMinimal + kModule + "[eval]\ndata = 3\n",
       {},
       "ConfigError",
       ":11: key 'eval.data'"},
      {"early stopping without best_metric",
       kMinimal + "early_stopping_patience = 2\n" + kModule,
       {},
       "ConfigError",
       ":8: 'train.early_stopping_patience' = 2"},
      {"negative early_stopping_patience",
       kMinimal + "early_stopping_patience = -1\n" + kModule,
       {},
       "ConfigError",
       ":8: key 'train.early_stopping_patience': must be >= 0"},
      {"negative lora.rank",
       kMinimal + kModule + "[lora]\nrank = -1\n",
       {},
       "ConfigError",
       ":11: key 'lora.rank': must be >= 0"},
      {"unknown LoRA target module",
       kMinimal + kModule + "[lora]\nrank = 4\ntarget_modules = [\"q_proj\", \"qkv_proj\"]\n",
       {},
       "ConfigError",
       ":12: key 'lora.target_modules[1]': expected one of \"q_proj\""},
      {"LoRA dropout of 1",
       kMinimal + kModule + "[lora]\nrank = 4\ndropout = 1.0\n",
       {},
       "ConfigError",
       ":12: key 'lora.dropout': must be < 1"},
      {"negative LoRA dropout",
       kMinimal + kModule + "[lora]\nrank = 4\ndropout = -0.1\n",
       {},
       "ConfigError",
       ":12: key 'lora.dropout': must be >= 0"},
      {"LoRA alpha of 0",
       kMinimal + kModule + "[lora]\nrank = 4\nalpha = 0.0\n",
       {},
       "ConfigError",
       ":12: key 'lora.alpha': must be > 0"},
      {"empty LoRA target_modules",
       kMinimal + kModule + "[lora]\nrank = 4\ntarget_modules = []\n",
       {},
       "ConfigError",
       ":12: key 'lora.target_modules' is empty"},
      {"LoRA target listed twice",
       kMinimal + kModule + "[lora]\nrank = 4\ntarget_modules = [\"v_proj\", \"v_proj\"]\n",
       {},
       "ConfigError",
       ":12: key 'lora.target_modules' lists 'v_proj' more than once"},
      {"LoRA keys without a rank",
       kMinimal + kModule + "[lora]\nalpha = 32.0\n",
       {},
       "ConfigError",
       ":11: key 'lora.alpha' only applies to LoRA (lora.rank > 0)"},
      {"lora.init that does not exist",
       kMinimal + kModule + "[lora]\nrank = 4\ninit = \"no/such/adapter\"\n",
       {},
       "ConfigError",
       ":12: 'lora.init' = \"no/such/adapter\""},
      {"bad --set precision",
       kMinimal + kModule,
       {"runtime.precision=\"bf16\""},
       "ConfigError",
       "--set runtime.precision=\"bf16\": key 'runtime.precision'"},
      {"missing plugin key",
       kMinimal.substr(kMinimal.find('\n') + 1) + kModule,
       {},
       "ConfigError",
       ": missing required key 'plugin'"},
      {"missing [module] section of the plugin", kMinimal, {}, "ConfigError", ": missing required key 'module.reward'"},
      {"missing required core key",
       "plugin = \"sft\"\n[batch]\nglobal_size = 8\n[train]\nmax_steps = 1\n" + kModule,
       {},
       "ConfigError",
       ": missing required key 'data.train'"},
      {"conflicting keys",
       "plugin = \"sft\"\n[data]\ntrain = \"t\"\n[batch]\nglobal_size = 8\nmicro_size = 2\nmicro_tokens = 1024\n"
       "[train]\nmax_steps = 1\n" +
           kModule,
       {},
       "ConfigError",
       ":7: keys 'batch.micro_size' = 2"},
      {"TOML syntax error", "plugin = \"sft\"\n[data]\ntrain = \n", {}, "ConfigError", ":3:"},
      {"non-UTF-8 bytes", kMinimal + kModule + "[optim]\nname = \"\xff\xfe\"\n", {}, "ConfigError", ":11:"},
      {"bad --set value", kMinimal + kModule, {"optim.lr=abc"}, "ConfigError", "--set optim.lr=abc: key 'optim.lr'"},
      {"--set of an unknown key",
       kMinimal + kModule,
       {"optim.lrr=1"},
       "ConfigError",
       "--set optim.lrr=1: unknown key 'optim.lrr'"},
      {"--set without '='", kMinimal + kModule, {"novalue"}, "UsageError", "--set 'novalue'"},
  };
  for (const ConfigCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = testing::write_text_file(dir, "x.toml", c.toml);
      const std::string location =
          std::string(c.location).rfind("--set", 0) == 0 ? c.location : file.string() + c.location;
      testing::check_rejected([&] { config::load_run_config(file, c.overrides, module_schema()); }, c.kind, location);
    }
  }
}

TEST_CASE("an unreadable config names the file", "[bad_inputs][config]") {
  const fs::path missing = testing::fresh_test_dir("bad_config") / "missing.toml";
  testing::check_rejected([&] { config::ConfigDocument::load(missing, {}); }, "ConfigError",
                          missing.string() + ": cannot read config file");
}
