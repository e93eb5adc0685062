// Config loading: schema checks, error messages (file:line + key), --set
// overrides, cross-key rules, and the resolve → to_toml → load round trip.
#include "catch.h"

#include "core/config/config_loader.h"
#include "core/config/core_sections.h"
#include "ptrain/sdk/config_schema.h"
#include "ptrain/sdk/errors.h"
#include "support/test_util.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using ptrain::config::ConfigDocument;
using ptrain::config::RunConfig;
using ptrain::sdk::ConfigError;
using ptrain::sdk::ConfigSchema;
using ptrain::sdk::ConfigValues;
using ptrain::sdk::UsageError;
using ptrain::testing::TempDir;

namespace {

// The smallest valid config; line numbers below count from its first line.
const char* kMinimal =
    "plugin = \"sft\"\n"         // 1
    "\n"                         // 2
    "[data]\n"                   // 3
    "train = \"train.jsonl\"\n"  // 4
    "\n"                         // 5
    "[batch]\n"                  // 6
    "global_size = 8\n"          // 7
    "\n"                         // 8
    "[train]\n"                  // 9
    "max_steps = 10\n";          // 10

ConfigSchema module_schema() {
  ConfigSchema schema;
  schema.add_string("loss_agg", "token_mean", "how token losses are combined", {"token_mean", "sequence_mean", "sum"});
  schema.add_float("beta", 0.1, "KL coefficient", 0.0);
  schema.add_int("group_size", 4, "completions per prompt", 1);
  schema.add_bool("normalize", true, "normalize advantages");
  return schema;
}

RunConfig resolve(const fs::path& file, const std::vector<std::string>& overrides = {},
                  const ConfigSchema& schema = module_schema()) {
  return ConfigDocument::load(file, overrides).resolve(schema);
}

// The message of the ConfigError that resolving `text` throws.
std::string resolve_error(const TempDir& dir, const std::string& text, const std::vector<std::string>& overrides = {},
                          const ConfigSchema& schema = module_schema()) {
  const fs::path file = dir.write("x.toml", text);
  try {
    resolve(file, overrides, schema);
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("expected a ConfigError for:\n" << text);
  return {};
}

void require_same(const RunConfig& a, const RunConfig& b) {
  CHECK(a.plugin == b.plugin);
  CHECK(a.seed == b.seed);
  CHECK(a.output_dir == b.output_dir);
  CHECK(a.model.init == b.model.init);
  CHECK(a.model.vocab_size == b.model.vocab_size);
  CHECK(a.model.hidden_size == b.model.hidden_size);
  CHECK(a.model.intermediate_size == b.model.intermediate_size);
  CHECK(a.model.num_layers == b.model.num_layers);
  CHECK(a.model.num_heads == b.model.num_heads);
  CHECK(a.model.num_kv_heads == b.model.num_kv_heads);
  CHECK(a.model.max_position_embeddings == b.model.max_position_embeddings);
  CHECK(a.model.rope_theta == b.model.rope_theta);
  CHECK(a.model.rms_norm_eps == b.model.rms_norm_eps);
  CHECK(a.model.tie_word_embeddings == b.model.tie_word_embeddings);
  CHECK(a.model.qkv_bias == b.model.qkv_bias);
  CHECK(a.tokenizer.kind == b.tokenizer.kind);
  CHECK(a.tokenizer.path == b.tokenizer.path);
  CHECK(a.data.train == b.data.train);
  CHECK(a.data.max_length == b.data.max_length);
  CHECK(a.batch.global_size == b.batch.global_size);
  CHECK(a.batch.micro_size == b.batch.micro_size);
  CHECK(a.batch.micro_tokens == b.batch.micro_tokens);
  CHECK(a.optim.name == b.optim.name);
  CHECK(a.optim.lr == b.optim.lr);
  CHECK(a.optim.weight_decay == b.optim.weight_decay);
  CHECK(a.optim.beta1 == b.optim.beta1);
  CHECK(a.optim.beta2 == b.optim.beta2);
  CHECK(a.optim.eps == b.optim.eps);
  CHECK(a.optim.momentum == b.optim.momentum);
  CHECK(a.optim.clip_grad_norm == b.optim.clip_grad_norm);
  CHECK(a.optim.decay_norms_and_biases == b.optim.decay_norms_and_biases);
  CHECK(a.schedule.name == b.schedule.name);
  CHECK(a.schedule.warmup_steps == b.schedule.warmup_steps);
  CHECK(a.schedule.min_lr_ratio == b.schedule.min_lr_ratio);
  CHECK(a.train.max_steps == b.train.max_steps);
  CHECK(a.train.log_every == b.train.log_every);
  CHECK(a.checkpoint.every_steps == b.checkpoint.every_steps);
  CHECK(a.checkpoint.keep_last == b.checkpoint.keep_last);
  CHECK(a.distributed.timeout_s == b.distributed.timeout_s);
  CHECK(a.runtime.threads == b.runtime.threads);
  REQUIRE(a.module.entries().size() == b.module.entries().size());
  for (const auto& [key, entry] : a.module.entries()) {
    INFO("module." << key);
    REQUIRE(b.module.has(key));
    CHECK(entry.value == b.module.entries().at(key).value);
  }
}

}  // namespace

TEST_CASE("config: format_config_value writes TOML literals that re-parse as the same type", "[config]") {
  using ptrain::sdk::format_config_value;
  CHECK(format_config_value(true) == "true");
  CHECK(format_config_value(int64_t{-3}) == "-3");
  CHECK(format_config_value(1e-5) == "1e-05");
  CHECK(format_config_value(1e-4) == "0.0001");
  CHECK(format_config_value(1.0) == "1.0");
  CHECK(format_config_value(10000.0) == "10000.0");
  CHECK(format_config_value(0.1) == "0.1");
  CHECK(format_config_value(1e20) == "1e+20");
  CHECK(format_config_value(0.1 + 0.2) == "0.30000000000000004");
  CHECK(format_config_value(-2.5e-300) == "-2.5e-300");
  CHECK(format_config_value(1e16) == "1e+16");
  CHECK(format_config_value(123456.75) == "123456.75");
  CHECK(format_config_value(0.0) == "0.0");
  CHECK(format_config_value(std::string("a\"b\\c\nd")) == "\"a\\\"b\\\\c\\nd\"");
  CHECK(format_config_value(std::string("\x01")) == "\"\\u0001\"");
}

TEST_CASE("config: ConfigValues accessors name the key on misuse", "[config]") {
  ConfigValues values("module");
  values.set("beta", 0.5, "x.toml:3", true);
  CHECK(values.get_float("beta") == 0.5);
  CHECK(values.set_by_user("beta"));
  CHECK(values.where("beta") == "x.toml:3: key 'module.beta'");
  CHECK_THROWS_WITH(values.get_int("beta"), Catch::Contains("module.beta") && Catch::Contains("float"));
  CHECK_THROWS_WITH(values.get_string("nope"), Catch::Contains("module.nope"));
  CHECK_FALSE(values.has("nope"));
  ConfigValues top("");
  top.set("seed", int64_t{1}, "x.toml:2", true);
  CHECK(top.where("seed") == "x.toml:2: key 'seed'");

  ConfigSchema schema;
  schema.add_int("n", 1, "doc", 0, 10).required();
  REQUIRE(schema.find("n") != nullptr);
  CHECK(schema.find("n")->required);
  CHECK(*schema.find("n")->max == 10.0);
  CHECK(schema.find("m") == nullptr);
}

TEST_CASE("config: defaults fill every key the user did not write", "[config]") {
  TempDir dir("ptrain_config_test");
  const RunConfig config = resolve(dir.write("x.toml", kMinimal));
  CHECK(config.plugin == "sft");
  CHECK(config.seed == 0);
  CHECK(config.output_dir == "runs/sft");
  CHECK(config.model.init.empty());
  CHECK(config.model.vocab_size == 384);
  CHECK(config.model.hidden_size == 256);
  CHECK(config.model.intermediate_size == 688);
  CHECK(config.model.num_layers == 4);
  CHECK(config.model.num_heads == 4);
  CHECK(config.model.num_kv_heads == 2);
  CHECK(config.model.max_position_embeddings == 512);
  CHECK(config.model.rope_theta == 10000.0);
  CHECK(config.model.rms_norm_eps == 1e-6);
  CHECK(config.model.tie_word_embeddings);
  CHECK_FALSE(config.model.qkv_bias);
  CHECK(config.model.model_type == "llama");
  CHECK(config.tokenizer.kind == ptrain::config::TokenizerKind::kBytes);
  CHECK(config.data.train == "train.jsonl");
  CHECK(config.data.max_length == 512);
  CHECK(config.batch.global_size == 8);
  CHECK(config.batch.micro_size == 8);  // no accumulation
  CHECK(config.batch.micro_tokens == 0);
  CHECK(config.optim.name == ptrain::config::OptimizerKind::kAdamW);
  CHECK(config.optim.lr == 1e-4);
  CHECK(config.optim.beta2 == 0.999);
  CHECK(config.optim.clip_grad_norm == 1.0);
  CHECK(config.schedule.name == ptrain::config::ScheduleKind::kCosine);
  CHECK(config.train.max_steps == 10);
  CHECK(config.train.log_every == 1);
  CHECK(config.checkpoint.keep_last == 2);
  CHECK(config.distributed.timeout_s == 300);
  CHECK(config.runtime.threads == 0);
  // No [module]: every module key takes its default.
  CHECK(config.module.section() == "module");
  CHECK(config.module.get_string("loss_agg") == "token_mean");
  CHECK(config.module.get_int("group_size") == 4);
  CHECK_FALSE(config.module.set_by_user("beta"));
  CHECK(config.module.where("beta") == "default: key 'module.beta'");
}

TEST_CASE("config: a full config round-trips through to_toml", "[config]") {
  TempDir dir("ptrain_config_test");
  const fs::path file = dir.write("full.toml",
                                  "plugin = \"dpo\"\n"
                                  "seed = 42\n"
                                  "output_dir = \"runs/my \\\"quoted\\\" run\"\n"
                                  "[model]\n"
                                  "vocab_size = 300\nhidden_size = 64\nintermediate_size = 160\nnum_layers = 2\n"
                                  "num_heads = 4\nnum_kv_heads = 4\nmax_position_embeddings = 128\n"
                                  "rope_theta = 500000\nrms_norm_eps = 1e-5\ntie_word_embeddings = false\n"
                                  "attention_bias = true\n"
                                  "[tokenizer]\nkind = \"bytes\"\n"
                                  "[data]\ntrain = \"data/train.jsonl\"\nmax_length = 100\n"
                                  "[batch]\nglobal_size = 16\nmicro_tokens = 400\n"
                                  "[optim]\nname = \"adamw\"\nlr = 3e-5\nweight_decay = 0.01\nbeta1 = 0.8\n"
                                  "beta2 = 0.95\neps = 1e-7\nclip_grad_norm = 0.5\ndecay_norms_and_biases = true\n"
                                  "[schedule]\nname = \"linear\"\nwarmup_steps = 5\nmin_lr_ratio = 0.1\n"
                                  "[train]\nmax_steps = 20\nlog_every = 2\n"
                                  "[checkpoint]\nevery_steps = 10\nkeep_last = 3\n"
                                  "[distributed]\ntimeout_s = 60\n"
                                  "[runtime]\nthreads = 2\n"
                                  "[module]\nloss_agg = \"sum\"\nbeta = 0.25\n");
  const RunConfig first = resolve(file);
  CHECK(first.seed == 42);
  CHECK(first.output_dir == "runs/my \"quoted\" run");
  CHECK(first.model.rope_theta == 500000.0);  // an integer is accepted for a float key
  CHECK(first.batch.micro_size == 0);
  CHECK(first.batch.micro_tokens == 400);

  const std::string text = ptrain::config::to_toml(first, module_schema());
  INFO(text);
  CHECK(text.find("# Resolved by ptrain from") == 0);
  CHECK(text.find("rms_norm_eps = 1e-05") != std::string::npos);
  CHECK(text.find("rope_theta = 500000.0") != std::string::npos);
  CHECK(text.find("\nmicro_size =") == std::string::npos);  // unset optional keys are left out
  CHECK(text.find("group_size = 4") != std::string::npos);  // module defaults are written too
  const RunConfig second = resolve(dir.write("resolved.toml", text));
  require_same(first, second);
  CHECK(second.source == dir.path() / "resolved.toml");

  // The defaults-only config round-trips too (derived micro_size, kind and output_dir).
  const RunConfig minimal = resolve(dir.write("min.toml", kMinimal));
  require_same(minimal, resolve(dir.write("min_resolved.toml", ptrain::config::to_toml(minimal, module_schema()))));
}

TEST_CASE("config: model.init round-trips without size keys", "[config]") {
  TempDir dir("ptrain_config_test");
  const RunConfig first =
      resolve(dir.write("x.toml", std::string(kMinimal) + "[model]\ninit = \"models/tiny\"\n"
                                                          "[tokenizer]\npath = \"models/tiny/tokenizer.json\"\n"));
  CHECK(first.model.init == "models/tiny");
  CHECK(first.model.hidden_size == 0);                                // sizes come from config.json, not defaults
  CHECK(first.tokenizer.kind == ptrain::config::TokenizerKind::kHf);  // inferred from path
  const std::string text = ptrain::config::to_toml(first, module_schema());
  CHECK(text.find("hidden_size") == std::string::npos);
  require_same(first, resolve(dir.write("y.toml", text)));
}

TEST_CASE("config: unknown key names file:line and suggests the close key", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string error = resolve_error(dir,
                                          "plugin = \"sft\"\n"     // 1
                                          "[data]\n"               // 2
                                          "train = \"t.jsonl\"\n"  // 3
                                          "[batch]\n"              // 4
                                          "global_size = 8\n"      // 5
                                          "micro_szie = 2\n"       // 6
                                          "[train]\n"              // 7
                                          "max_steps = 1\n");      // 8
  const std::string file = (dir.path() / "x.toml").string();
  CHECK(error == file + ":6: unknown key 'batch.micro_szie' (did you mean 'micro_size'?)");

  // A key from another section, and a transformers name.
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "lr = 1e-5\n"),
             Catch::Contains(":11: unknown key 'train.lr' (did you mean 'optim.lr'?)"));
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[optim]\nlearning_rate = 1e-5\n"),
             Catch::Contains(":12: unknown key 'optim.learning_rate' (did you mean 'lr'?)"));
  // No close key: the section's keys are listed.
  CHECK_THAT(
      resolve_error(dir, std::string(kMinimal) + "[runtime]\nzzz = 1\n"),
      Catch::Contains(":12: unknown key 'runtime.zzz' (keys of [runtime]: threads, device, precision, cpu_kernels)"));
}

TEST_CASE("config: unknown section suggests a known one", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string file = (dir.path() / "x.toml").string();
  CHECK(resolve_error(dir, std::string(kMinimal) + "[optimizer]\nlr = 1e-5\n") ==
        file + ":11: unknown section [optimizer] (did you mean [optim]?)");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[shedule]\n") ==
        file + ":11: unknown section [shedule] (did you mean [schedule]?)");
}

TEST_CASE("config: wrong type names the expected and actual type", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string file = (dir.path() / "x.toml").string();
  CHECK(resolve_error(dir, std::string(kMinimal) + "[optim]\nlr = \"abc\"\n") ==
        file + ":12: key 'optim.lr': expected a float, got string \"abc\"");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[model]\nnum_layers = 2.5\n") ==
        file + ":12: key 'model.num_layers': expected an integer, got float 2.5");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[model]\nattention_bias = 1\n") ==
        file + ":12: key 'model.attention_bias': expected a bool, got integer 1");
  CHECK(resolve_error(dir, "model = 3\n" + std::string(kMinimal)) ==
        file + ":1: 'model' is a section; write it as [model], got integer 3");
}

TEST_CASE("config: out-of-range values name the bound", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string file = (dir.path() / "x.toml").string();
  CHECK(resolve_error(dir,
                      "plugin = \"sft\"\n[data]\ntrain = \"t\"\n[batch]\nglobal_size = 0\n[train]\nmax_steps = 1\n") ==
        file + ":5: key 'batch.global_size': must be >= 1, got 0");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[schedule]\nmin_lr_ratio = 1.5\n") ==
        file + ":12: key 'schedule.min_lr_ratio': must be <= 1.0, got 1.5");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[optim]\nlr = 0\n") ==
        file + ":12: key 'optim.lr': must be > 0, got 0.0");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[optim]\nbeta2 = 1.0\n") ==
        file + ":12: key 'optim.beta2': must be < 1, got 1.0");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[optim]\nlr = nan\n") ==
        file + ":12: key 'optim.lr': must be a finite number, got nan");
}

TEST_CASE("config: a bad choice lists the allowed values", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string file = (dir.path() / "x.toml").string();
  CHECK(resolve_error(dir, std::string(kMinimal) + "[optim]\nname = \"adam\"\n") ==
        file + ":12: key 'optim.name': expected one of \"adamw\", \"sgd\", got \"adam\" (did you mean \"adamw\"?)");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[schedule]\nname = \"step\"\n") ==
        file + ":12: key 'schedule.name': expected one of \"constant\", \"linear\", \"cosine\", got \"step\"");
}

TEST_CASE("config: a missing required key names the key and the file", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string file = (dir.path() / "x.toml").string();
  const std::string error = resolve_error(dir, "plugin = \"sft\"\n[batch]\nglobal_size = 8\n[train]\nmax_steps = 1\n");
  CHECK_THAT(error, Catch::StartsWith(file + ": missing required key 'data.train' ("));

  // Several errors: one summary line, then one line each, in file order.
  const std::string many = resolve_error(dir, "[batch]\nglobal_size = 0\n[optim]\nname = \"x\"\n");
  INFO(many);
  CHECK_THAT(many, Catch::StartsWith(file + ": 5 config errors:\n"));
  CHECK_THAT(many, Catch::Contains("\n  " + file + ":2: key 'batch.global_size'"));
  CHECK_THAT(many, Catch::Contains("\n  " + file + ":4: key 'optim.name'"));
  CHECK_THAT(many, Catch::Contains("\n  " + file + ": missing required key 'plugin'"));
  CHECK_THAT(many, Catch::Contains("\n  " + file + ": missing required key 'data.train'"));
  CHECK_THAT(many, Catch::Contains("\n  " + file + ": missing required key 'train.max_steps'"));
  CHECK(many.find(":2: key 'batch.global_size'") < many.find(":4: key 'optim.name'"));

  // plugin() is available before resolve, and names the file when missing.
  const fs::path no_plugin = dir.write("np.toml", "[data]\ntrain = \"t\"\n");
  CHECK_THROWS_WITH(ConfigDocument::load(no_plugin, {}).plugin(),
                    Catch::StartsWith(no_plugin.string() + ": missing required key 'plugin'"));
  CHECK(ConfigDocument::load(dir.write("p.toml", kMinimal), {}).plugin() == "sft");
}

TEST_CASE("config: --set overrides existing and new keys with TOML type inference", "[config]") {
  TempDir dir("ptrain_config_test");
  const fs::path file = dir.write("x.toml", kMinimal);
  const RunConfig config =
      resolve(file, {"optim.lr=1e-5", "batch.global_size=32", "model.attention_bias=true",
                     "data.train=other/file.jsonl", "seed=7", "optim.name=\"sgd\"", "output_dir=2024", "module.beta=1",
                     "train.max_steps=3", "train.max_steps=5"});
  CHECK(config.optim.lr == 1e-5);
  CHECK(config.batch.global_size == 32);
  CHECK(config.batch.micro_size == 32);
  CHECK(config.model.qkv_bias);
  CHECK(config.model.model_type == "qwen2");
  CHECK(config.data.train == "other/file.jsonl");  // not a TOML value: taken as a string
  CHECK(config.seed == 7);
  CHECK(config.optim.name == ptrain::config::OptimizerKind::kSgd);
  CHECK(config.output_dir == "2024");  // a string key keeps the text as written
  CHECK(config.module.get_float("beta") == 1.0);
  CHECK(config.module.where("beta") == "--set module.beta=1: key 'module.beta'");
  CHECK(config.train.max_steps == 5);  // the last --set wins

  // An override's error points at the --set, not at the file.
  CHECK(resolve_error(dir, kMinimal, {"optim.lr=abc"}) ==
        "--set optim.lr=abc: key 'optim.lr': expected a float, got string \"abc\"");
  CHECK(resolve_error(dir, kMinimal, {"optim.lrr=1"}) ==
        "--set optim.lrr=1: unknown key 'optim.lrr' (did you mean 'lr'?)");
  CHECK(resolve_error(dir, kMinimal, {"optimm.lr=1"}) ==
        "--set optimm.lr=1: unknown section [optimm] (did you mean [optim]?)");
  CHECK(resolve_error(dir, kMinimal, {"train.max_steps=-1"}) ==
        "--set train.max_steps=-1: key 'train.max_steps': must be >= 1, got -1");
}

TEST_CASE("config: malformed --set is a usage error", "[config]") {
  TempDir dir("ptrain_config_test");
  const fs::path file = dir.write("x.toml", kMinimal);
  CHECK_THROWS_AS(ConfigDocument::load(file, {"novalue"}), UsageError);
  CHECK_THROWS_WITH(ConfigDocument::load(file, {"novalue"}), Catch::StartsWith("--set 'novalue': no '='"));
  CHECK_THROWS_AS(ConfigDocument::load(file, {"=3"}), UsageError);
  CHECK_THROWS_AS(ConfigDocument::load(file, {"a.b.c=3"}), UsageError);
  CHECK_THROWS_AS(ConfigDocument::load(file, {"optim.=3"}), UsageError);
  // Setting a key under something that is not a section.
  CHECK_THROWS_WITH(ConfigDocument::load(file, {"plugin.x=3"}), Catch::Contains("'plugin' is string \"sft\""));
}

TEST_CASE("config: [module] is validated against the plugin's schema", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string file = (dir.path() / "x.toml").string();
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\nloss_agg = \"token_mean\"\nbta = 0.2\n") ==
        file + ":13: unknown key 'module.bta' (did you mean 'beta'?)");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\nloss_agg = \"mean\"\n") ==
        file + ":12: key 'module.loss_agg': expected one of \"token_mean\", \"sequence_mean\", \"sum\", got \"mean\"");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\ngroup_size = 0\n") ==
        file + ":12: key 'module.group_size': must be >= 1, got 0");
  // A plugin with no module keys rejects any.
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\nx = 1\n", {}, ConfigSchema()) ==
        file + ":12: unknown key 'module.x' (this section takes no keys)");

  const RunConfig config = resolve(dir.write("ok.toml", std::string(kMinimal) + "[module]\nbeta = 0.3\n"));
  CHECK(config.module.get_float("beta") == 0.3);
  CHECK(config.module.where("beta") == file.substr(0, file.size() - 6) + "ok.toml:12: key 'module.beta'");
  CHECK(config.module.set_by_user("beta"));
  CHECK(config.module.get_bool("normalize"));
}

TEST_CASE("config: incompatible key combinations name both keys", "[config]") {
  TempDir dir("ptrain_config_test");
  const std::string file = (dir.path() / "x.toml").string();
  const std::string both = resolve_error(dir,
                                         "plugin = \"sft\"\n[data]\ntrain = \"t\"\n[batch]\nglobal_size = 8\n"
                                         "micro_size = 2\nmicro_tokens = 1024\n[train]\nmax_steps = 1\n");
  CHECK(both == file + ":7: keys 'batch.micro_size' = 2 (" + file + ":6) and 'batch.micro_tokens' = 1024 (" + file +
                    ":7) are both set; a microbatch is sized by examples or by tokens, choose one");

  const std::string init =
      resolve_error(dir, std::string(kMinimal) + "[model]\ninit = \"models/tiny\"\nhidden_size = 64\n");
  CHECK(init == file + ":12: key 'model.init' cannot be combined with 'model.hidden_size' (" + file +
                    ":13): the sizes come from models/tiny/config.json; remove the size keys or remove init");

  CHECK(resolve_error(dir, std::string(kMinimal) + "[tokenizer]\nkind = \"hf\"\n") ==
        file + ":12: key 'tokenizer.kind' = \"hf\" needs 'tokenizer.path' (the tokenizer.json to load)");
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[tokenizer]\nkind = \"bytes\"\npath = \"t.json\"\n"),
             Catch::StartsWith(file + ":13: key 'tokenizer.path' is ignored by 'tokenizer.kind' = \"bytes\""));
  CHECK_THAT(
      resolve_error(dir, std::string(kMinimal) + "[model]\nvocab_size = 100\n"),
      Catch::StartsWith(file + ":12: 'model.vocab_size' = 100 (" + file + ":12) is too small for 'tokenizer.kind'"));
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[model]\nnum_heads = 3\n"),
             Catch::Contains("\n  " + file +
                             ":12: 'model.hidden_size' = 256 (default) is not divisible by 'model.num_heads' = 3"));
  // An explicit head_dim replaces hidden_size / num_heads, which need not
  // divide (256 / 3).
  const auto explicit_head = resolve(
      dir.write("head.toml", std::string(kMinimal) + "[model]\nnum_heads = 3\nnum_kv_heads = 1\nhead_dim = 8\n"));
  CHECK(explicit_head.model.head_dim == 8);
  CHECK_THAT(
      resolve_error(dir, std::string(kMinimal) + "[model]\nnum_kv_heads = 3\n"),
      Catch::StartsWith(file + ":12: 'model.num_heads' = 4 (default) is not divisible by 'model.num_kv_heads' = 3"));
  CHECK_THAT(
      resolve_error(dir, std::string(kMinimal) + "[model]\nmax_position_embeddings = 256\n"),
      Catch::StartsWith(file + ":12: 'data.max_length' = 512 (default) exceeds 'model.max_position_embeddings' = 256"));
  // log_every beyond max_steps is fine: the last step is always logged.
  CHECK(resolve(dir.write("log.toml", std::string(kMinimal) + "log_every = 20\n")).train.log_every == 20);
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[schedule]\nwarmup_steps = 11\n"),
             Catch::StartsWith(file + ":12: 'schedule.warmup_steps' = 11 (" + file + ":12) exceeds 'train.max_steps'"));
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[optim]\nmomentum = 0.9\n"),
             Catch::StartsWith(file + ":12: key 'optim.momentum' only applies to optim.name = \"sgd\""));
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[optim]\nname = \"sgd\"\nbeta1 = 0.5\n"),
             Catch::StartsWith(file + ":13: key 'optim.beta1' only applies to optim.name = \"adamw\""));
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[schedule]\nname = \"constant\"\nmin_lr_ratio = 0.1\n"),
             Catch::StartsWith(
                 file + ":13: key 'schedule.min_lr_ratio' only applies to schedule.name = \"linear\" or \"cosine\""));
  // A redefined table is a TOML syntax error, reported with file:line:col.
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[batch]\n"), Catch::StartsWith(file + ":11:"));

  // A micro_tokens budget below one full sequence.
  CHECK_THAT(resolve_error(dir,
                           "plugin = \"sft\"\n[data]\ntrain = \"t\"\nmax_length = 64\n[batch]\nglobal_size = 8\n"
                           "micro_tokens = 32\n[train]\nmax_steps = 1\n"),
             Catch::StartsWith(file + ":7: 'batch.micro_tokens' = 32 (" + file +
                               ":7) is smaller than 'data.max_length' = 64"));
}

TEST_CASE("config: TOML syntax errors and unreadable files name the file", "[config]") {
  TempDir dir("ptrain_config_test");
  const fs::path file = dir.write("bad.toml", "plugin = \"sft\"\n[data]\ntrain = \n");
  CHECK_THROWS_AS(ConfigDocument::load(file, {}), ConfigError);
  CHECK_THROWS_WITH(ConfigDocument::load(file, {}), Catch::StartsWith(file.string() + ":3:"));
  const fs::path missing = dir.path() / "missing.toml";
  CHECK_THROWS_WITH(ConfigDocument::load(missing, {}),
                    Catch::StartsWith(missing.string() + ": cannot read config file"));
}

TEST_CASE("config: every core key has a doc and a sane default", "[config]") {
  for (const ptrain::config::CoreSection& section : ptrain::config::core_sections()) {
    for (const auto& key : section.schema.keys()) {
      INFO(section.name << "." << key.name);
      CHECK_FALSE(key.doc.empty());
      if (key.default_value && key.min) {
        const double value = key.type == ptrain::sdk::ValueType::kInt
                                 ? static_cast<double>(std::get<int64_t>(*key.default_value))
                                 : std::get<double>(*key.default_value);
        CHECK(value >= *key.min);
      }
    }
  }
  CHECK(ptrain::config::find_core_section("optim") != nullptr);
  CHECK(ptrain::config::find_core_section("module") == nullptr);
}

TEST_CASE("config: list keys read TOML arrays, check every element and round-trip", "[config]") {
  TempDir dir("ptrain_config_test");
  ConfigSchema schema = module_schema();
  schema.add_string_list("losses", std::vector<std::string>{"a"}, "losses to combine", {"a", "b", "c"});
  schema.add_float_list("weights", std::vector<double>{}, "one per loss", 0.0, 10.0);
  const std::string file = (dir.path() / "x.toml").string();
  using Strings = std::vector<std::string>;
  using Numbers = std::vector<double>;

  const RunConfig config =
      resolve(dir.write("ok.toml", std::string(kMinimal) + "[module]\nlosses = [\"b\", \"c\"]\nweights = [1, 0.5]\n"),
              {}, schema);
  CHECK(config.module.get_string_list("losses") == Strings{"b", "c"});
  CHECK(config.module.get_float_list("weights") == Numbers{1.0, 0.5});
  CHECK_THROWS_WITH(config.module.get_string("losses"), Catch::Contains("holds a list of strings [\"b\", \"c\"]"));

  const RunConfig defaults = resolve(dir.write("defaults.toml", kMinimal), {}, schema);
  CHECK(defaults.module.get_string_list("losses") == Strings{"a"});
  CHECK(defaults.module.get_float_list("weights").empty());

  // A single value of the element type is a one-element list; --set takes TOML arrays and bare words.
  const RunConfig single =
      resolve(dir.write("single.toml", std::string(kMinimal) + "[module]\nlosses = \"c\"\nweights = 2\n"), {}, schema);
  CHECK(single.module.get_string_list("losses") == Strings{"c"});
  CHECK(single.module.get_float_list("weights") == Numbers{2.0});
  const fs::path minimal = dir.write("minimal.toml", kMinimal);
  const RunConfig overridden = resolve(minimal, {"module.losses=[\"a\", \"b\"]", "module.weights=[3, 4.5]"}, schema);
  CHECK(overridden.module.get_string_list("losses") == Strings{"a", "b"});
  CHECK(overridden.module.get_float_list("weights") == Numbers{3.0, 4.5});
  CHECK(resolve(minimal, {"module.losses=b"}, schema).module.get_string_list("losses") == Strings{"b"});

  // Errors name the element and the line it is on.
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\nlosses = [\"a\",\n  \"d\"]\n", {}, schema) ==
        file + ":13: key 'module.losses[1]': expected one of \"a\", \"b\", \"c\", got \"d\" (did you mean \"a\"?)");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\nweights = [1, \"x\"]\n", {}, schema) ==
        file + ":12: key 'module.weights[1]': expected a float, got string \"x\"");
  CHECK_THAT(resolve_error(dir, std::string(kMinimal) + "[module]\nweights = [1, 11]\n", {}, schema),
             Catch::StartsWith(file + ":12: key 'module.weights[1]': must be <= 10"));
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\nlosses = 3\n", {}, schema) ==
        file +
            ":12: key 'module.losses': expected a list of strings (a TOML array like [\"a\", \"b\"]), got integer 3");
  CHECK(resolve_error(dir, std::string(kMinimal) + "[module]\nlosses = [[\"a\"]]\n", {}, schema) ==
        file + ":12: key 'module.losses[0]': expected a string, got an array");
  CHECK_THAT(resolve_error(dir, kMinimal, {"module.weights=[1, -1]"}, schema),
             Catch::StartsWith("--set module.weights=[1, -1]: key 'module.weights[1]': must be >= 0"));

  // Written back as TOML arrays that load as the same lists.
  const std::string text = ptrain::config::to_toml(config, schema);
  CHECK_THAT(text, Catch::Contains("losses = [\"b\", \"c\"]") && Catch::Contains("weights = [1.0, 0.5]"));
  const RunConfig again = resolve(dir.write("again.toml", text), {}, schema);
  CHECK(again.module.get_string_list("losses") == Strings{"b", "c"});
  CHECK(again.module.get_float_list("weights") == Numbers{1.0, 0.5});
  CHECK(ptrain::sdk::format_config_value(Numbers{}) == "[]");
}
