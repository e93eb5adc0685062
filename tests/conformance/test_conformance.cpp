// The conformance harness (ptrain/testing/conformance.h) on the bundled
// plugins, and on a plugin that breaks the contract. Like a plugin author's
// test, this file uses only the SDK and the harness (and the suite's
// header-only scratch folder).
#include "catch.h"

#include "ptrain/testing/conformance.h"
#include "support/scratch_dir.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxLength = 24;

// One folder per name under the process's scratch root, new with the process;
// the harness recreates its work_dir.
fs::path scratch_dir(const std::string& name) {
  const fs::path dir = ptrain::testing::scratch_root() / ("conformance_" + name);
  fs::create_directories(dir);
  return dir;
}

void write_lines(const fs::path& path, const std::vector<nlohmann::json>& lines) {
  std::ofstream out(path);
  for (const nlohmann::json& line : lines) out << line.dump() << "\n";
}

// A tiny job: 8 examples of uneven lengths as the step-0 global batch.
fs::path write_config(const fs::path& dir, const std::vector<nlohmann::json>& data, const std::string& module) {
  write_lines(dir / "train.jsonl", data);
  const fs::path path = dir / "job.toml";
  std::ofstream(path) << "seed = 3\n"
                      << "[model]\nvocab_size = 264\nhidden_size = 32\nintermediate_size = 48\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "tie_word_embeddings = false\nattention_bias = true\n"
                      << "[data]\ntrain = \"" << (dir / "train.jsonl").string() << "\"\nmax_length = " << kMaxLength
                      << "\n[batch]\nglobal_size = " << data.size() << "\n[module]\n"
                      << module;
  return path;
}

std::vector<nlohmann::json> sft_data() {
  std::vector<nlohmann::json> lines;
  for (int i = 0; i < 8; ++i) {
    lines.push_back({{"prompt", std::string(1 + (i * 5) % 9, static_cast<char>('a' + i)) + "="},
                     {"completion", std::string(1 + (i * 3) % 7, static_cast<char>('0' + i))}});
  }
  return lines;
}

std::vector<nlohmann::json> dpo_data() {
  std::vector<nlohmann::json> lines;
  for (int i = 0; i < 8; ++i) {
    lines.push_back({{"prompt", std::to_string(i) + "+" + std::string(1 + i % 4, '1') + "="},
                     {"chosen", std::string(1 + (i * 3) % 5, static_cast<char>('0' + i))},
                     {"rejected", std::string(1 + (i * 2) % 6, static_cast<char>('9' - i))}});
  }
  return lines;
}

std::vector<nlohmann::json> grpo_data() {
  std::vector<nlohmann::json> lines;
  for (int i = 0; i < 4; ++i) {
    lines.push_back(
        {{"prompt", std::to_string(i) + "+" + std::to_string(2 * i + 1) + "="}, {"answer", std::to_string(3 * i + 1)}});
  }
  return lines;
}

// Unpaired completions, desirable and undesirable mixed, of uneven lengths.
std::vector<nlohmann::json> kto_data() {
  std::vector<nlohmann::json> lines;
  for (int i = 0; i < 8; ++i) {
    lines.push_back({{"prompt", std::to_string(i) + "*" + std::string(1 + (i * 3) % 5, '2') + "="},
                     {"completion", std::string(1 + (i * 5) % 6, static_cast<char>('0' + i))},
                     {"label", i % 3 != 1}});
  }
  return lines;
}

const char* const kKtoModule = "beta = 0.5\ndesirable_weight = 1.5\nundesirable_weight = 0.75\n";

// A random model rarely emits <eos>, so completions end at any of 36 stop
// strings (~14% of tokens): lengths vary within a group, and with them the
// format and length rewards, so advantages and the gradient are not zero.
const char* const kGrpoModule =
    "num_generations = 4\nmax_completion_length = 6\ntemperature = 1.0\n"
    "stop_strings = [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\","
    "\"n\",\"o\",\"p\",\"q\",\"r\",\"s\",\"t\",\"u\",\"v\",\"w\",\"x\",\"y\",\"z\",\"0\",\"1\",\"2\","
    "\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]\n"
    "reward_funcs = [\"format\", \"length\"]\nformat_pattern = \"[\\\\s\\\\S]*\"\noverlong_cache = 5\n"
    "beta = 0.1\nloss_type = \"dapo\"\n";

// A prompt longer than data.max_length leaves an SFT example no trainable token.
const nlohmann::json kUntrainableSftExample = {{"prompt", std::string(2 * kMaxLength, 'p')}, {"completion", "x"}};
// And a KTO example no completion token to score (nor to lend a KL pair).
const nlohmann::json kUnscorableKtoExample = {
    {"prompt", std::string(2 * kMaxLength, 'p')}, {"completion", "x"}, {"label", true}};

// Whether a one-process run computes on a device: a GPU is visible, or
// PTRAIN_TEST_DEVICE names the tests' stand-in device. Two ranks on this
// node would still run on the CPU.
bool one_process_on_a_device() {
  return (at::hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0) || std::getenv("PTRAIN_TEST_DEVICE") != nullptr;
}

// Whether a bf16 product's float32 result is rounded to bfloat16 (docs/devices.md):
// ATen's products do that on every device and in builds without oneDNN; only
// oneDNN's on the CPU keep it.
bool bf16_products_round() {
#ifndef PTRAIN_HAVE_ONEDNN
  return true;
#else
  return one_process_on_a_device();
#endif
}

// Splits of a bf16-mixed step then differ by ~2e-3 relative (a per-microbatch
// normalisation by far more); LoRA's small adapter gradients by up to 8.8e-3
// (DPO on the stand-in device).
constexpr double kRoundedBf16Tolerance = 5e-3;
constexpr double kRoundedBf16LoraTolerance = 2e-2;

// Each bundled plugin with a tiny job of its own: DPO reference-free (with a
// reference equal to the starting policy every reward is rounding noise).
struct BundledPlugin {
  std::string name;
  fs::path library;
  std::vector<nlohmann::json> data;
  std::string module;
};

std::vector<BundledPlugin> bundled_plugins() {
  return {{"sft", PTRAIN_SFT_PLUGIN, sft_data(), "loss_agg = \"token_mean\"\n"},
          {"dpo", PTRAIN_DPO_PLUGIN, dpo_data(),
           "loss = [\"sigmoid\", \"sft\"]\nloss_weights = [1, 0.5]\nbeta = 0.5\nreference_free = true\n"},
          {"grpo", PTRAIN_GRPO_PLUGIN, grpo_data(), kGrpoModule},
          {"kto", PTRAIN_KTO_PLUGIN, kto_data(), kKtoModule}};
}

}  // namespace

TEST_CASE("the SFT plugin passes the conformance harness in every aggregation mode", "[conformance][device]") {
  for (const std::string mode : {"token_mean", "seq_mean_token_mean", "sum"}) {
    DYNAMIC_SECTION("loss_agg = " << mode) {
      const fs::path dir = scratch_dir("sft_" + mode);
      ptrain::testing::ConformanceSpec spec;
      spec.plugin = PTRAIN_SFT_PLUGIN;
      spec.config = write_config(dir, sft_data(), "loss_agg = \"" + mode + "\"\n");
      spec.zero_unit_examples = {kUntrainableSftExample, kUntrainableSftExample};
      spec.work_dir = dir / "work";
      spec.check_world_size_2 = mode == "token_mean";  // one real two-rank run is enough per plugin
      const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
      INFO(report.text());
      CHECK(report.passed());
      CHECK(report.checks.size() == (spec.check_world_size_2 ? 7u : 6u));
    }
  }
}

TEST_CASE("the DPO plugin, with an SFT term of its own units, passes the conformance harness",
          "[conformance][device]") {
  // Reference-free: with a reference equal to the starting policy every
  // reward is 0 up to rounding, and rewards/accuracy (chosen > rejected)
  // would compare rounding noise between splits.
  struct Variant {
    std::string name, module;
    bool two_ranks;  // one real two-rank run is enough per plugin
  };
  const std::vector<Variant> variants{
      {"sigmoid+sft", "loss = [\"sigmoid\", \"sft\"]\nloss_weights = [1, 0.5]\n", true},
      {"bco_pair+ipo+sft, WPO weights, LD-DPO",
       "loss = [\"bco_pair\", \"ipo\", \"sft\"]\nloss_weights = [1, 0.5, 0.25]\nuse_weighting = true\n"
       "ld_alpha = 0.5\n",
       false}};
  for (size_t i = 0; i < variants.size(); ++i) {
    DYNAMIC_SECTION(variants[i].name) {
      const fs::path dir = scratch_dir("dpo_" + std::to_string(i));
      ptrain::testing::ConformanceSpec spec;
      spec.plugin = PTRAIN_DPO_PLUGIN;
      spec.config = write_config(dir, dpo_data(), variants[i].module + "beta = 0.5\nreference_free = true\n");
      spec.work_dir = dir / "work";
      spec.check_world_size_2 = variants[i].two_ranks;
      const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
      INFO(report.text());
      CHECK(report.passed());
      CHECK(report.checks.size() == (spec.check_world_size_2 ? 7u : 6u));
    }
  }
}

TEST_CASE("the GRPO plugin, rollouts and a KL term included, passes the conformance harness", "[conformance][device]") {
  for (const std::string loss_type : {"dapo", "grpo", "dr_grpo"}) {
    DYNAMIC_SECTION("loss_type = " << loss_type) {
      const fs::path dir = scratch_dir("grpo_" + loss_type);
      ptrain::testing::ConformanceSpec spec;
      spec.plugin = PTRAIN_GRPO_PLUGIN;
      std::string module = kGrpoModule;
      module.replace(module.find("\"dapo\""), 6, "\"" + loss_type + "\"");
      spec.config = write_config(dir, grpo_data(), module);
      spec.work_dir = dir / "work";
      spec.check_world_size_2 = loss_type == "dapo";
      const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
      INFO(report.text());
      CHECK(report.passed());
    }
  }
}

TEST_CASE("the GRPO plugin passes the conformance harness with multi-turn episodes",
          "[conformance][environment][device]") {
  // Two-turn episodes with the echo environment (tests/plugins): a turn, the
  // observation "ok" as a user turn (context, never trained), a last turn
  // whose text sets the reward. Room for them: 64 positions, 40 episode tokens.
  const fs::path dir = scratch_dir("grpo_environment");
  ptrain::testing::ConformanceSpec spec;
  spec.plugin = PTRAIN_GRPO_PLUGIN;
  spec.config =
      write_config(dir, grpo_data(),
                   std::string(kGrpoModule) + "environment = \"" + PTRAIN_ECHO_ENVIRONMENT + "\"\nmax_turns = 2\n");
  spec.overrides = {"model.max_position_embeddings=64", "data.max_length=56", "module.max_completion_length=40"};
  spec.work_dir = dir / "work";
  spec.check_world_size_2 = true;
  const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
  INFO(report.text());
  CHECK(report.passed());
}

TEST_CASE("the GRPO plugin passes the conformance harness with CISPO, SAPO and dynamic sampling that refills",
          "[conformance]") {
  // Refill borrows the next global batches from the core's sampler; on two
  // ranks (a real `ptrain train` run) the ranks must agree on which groups come first.
  struct Variant {
    std::string name, module;
    bool two_ranks;
  };
  const std::vector<Variant> variants{
      {"cispo, refill", "policy_loss = \"cispo\"\nfilter_zero_std_groups = true\nmax_generation_rounds = 3\n", true},
      {"sapo", "policy_loss = \"sapo\"\nsapo_tau_neg = 2.0\n", false}};
  for (size_t i = 0; i < variants.size(); ++i) {
    DYNAMIC_SECTION(variants[i].name) {
      const fs::path dir = scratch_dir("grpo_variant_" + std::to_string(i));
      ptrain::testing::ConformanceSpec spec;
      spec.plugin = PTRAIN_GRPO_PLUGIN;
      spec.config = write_config(dir, grpo_data(), std::string(kGrpoModule) + variants[i].module);
      spec.work_dir = dir / "work";
      spec.check_world_size_2 = variants[i].two_ranks;
      const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
      INFO(report.text());
      CHECK(report.passed());
    }
  }
}

TEST_CASE("the KTO plugin, its z0 over the whole global batch, passes the conformance harness", "[conformance][kto]") {
  for (const std::string loss_type : {"kto", "apo_zero_unpaired"}) {
    DYNAMIC_SECTION("loss_type = " << loss_type) {
      const fs::path dir = scratch_dir("kto_" + loss_type);
      ptrain::testing::ConformanceSpec spec;
      spec.plugin = PTRAIN_KTO_PLUGIN;
      spec.config = write_config(dir, kto_data(), std::string(kKtoModule) + "loss_type = \"" + loss_type + "\"\n");
      spec.zero_unit_examples = {kUnscorableKtoExample, kUnscorableKtoExample};
      spec.work_dir = dir / "work";
      spec.check_world_size_2 = loss_type == "kto";
      const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
      INFO(report.text());
      CHECK(report.passed());
      CHECK(report.checks.size() == (spec.check_world_size_2 ? 7u : 6u));
    }
  }
}

TEST_CASE("the harness catches a KTO whose z0 is estimated per microbatch, once the policy has moved",
          "[conformance][kto]") {
  const fs::path dir = scratch_dir("broken_kto");
  ptrain::testing::ConformanceSpec spec;
  spec.plugin = PTRAIN_BROKEN_KTO_PLUGIN;
  spec.config = write_config(dir, kto_data(), kKtoModule);
  spec.zero_unit_examples = {kUnscorableKtoExample};
  spec.work_dir = dir / "work";
  const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
  INFO(report.text());
  CHECK_FALSE(report.passed());
  for (const char* name : {"split_invariance", "metric_reduction", "world_size_2"}) {
    INFO(name);
    REQUIRE(report.find(name) != nullptr);
    CHECK_FALSE(report.find(name)->passed);
  }
  CHECK_THAT(report.find("split_invariance")->detail,
             Catch::Contains("a statistic of the batch") && Catch::Contains("micro_size=1: relative gradient error"));
  CHECK_THAT(report.find("metric_reduction")->detail, Catch::Contains("'kl' (weighted_mean)"));
  // Its units and its reads are KTO's own.
  CHECK(report.find("units_before_forward")->passed);
  CHECK(report.find("no_scalar_reads")->passed);

  // At the first step its reference is the policy itself: every log-ratio is
  // 0, so is every per-microbatch z0, and the step looks right.
  spec.steps_before_checks = 0;
  spec.check_world_size_2 = false;
  spec.work_dir = dir / "work_first_step";
  const ptrain::testing::ConformanceReport first_step = ptrain::testing::check_plugin_conformance(spec);
  INFO(first_step.text());
  CHECK(first_step.passed());
}

TEST_CASE("every bundled plugin passes the conformance harness under bf16-mixed",
          "[conformance][precision][device][bf16]") {
  const std::vector<BundledPlugin> plugins = bundled_plugins();
  for (const BundledPlugin& plugin : plugins) {
    DYNAMIC_SECTION(plugin.name) {
      const fs::path dir = scratch_dir("bf16_" + plugin.name);
      ptrain::testing::ConformanceSpec spec;
      spec.plugin = plugin.library;
      spec.config = write_config(dir, plugin.data, plugin.module);
      spec.overrides = {"runtime.precision=\"bf16-mixed\""};
      // With oneDNN on the CPU a bf16 product's float32 result is not
      // rounded, so the default tolerance (float32 rounding) holds.
      if (bf16_products_round()) spec.tolerance = kRoundedBf16Tolerance;
      spec.work_dir = dir / "work";
      // Two ranks on one node run on the CPU (docs/devices.md): on the
      // stand-in device that would hold oneDNN's unrounded bf16 products
      // against the device's rounded ones, which part by more than the
      // tolerance once the policy has moved. The same check without the
      // stand-in (ctest label conformance) holds both sides to float32 rounding.
      spec.check_world_size_2 = plugin.name == "sft" && !one_process_on_a_device();
      const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
      INFO(report.text());
      CHECK(report.passed());
      REQUIRE(report.find("device_and_dtype") != nullptr);
      CHECK_THAT(report.find("device_and_dtype")->detail, Catch::Contains("runtime.precision = bf16-mixed"));
    }
  }
}

TEST_CASE("every bundled plugin passes the conformance harness with LoRA adapters",
          "[conformance][lora][device][bf16]") {
  // Only the adapters train; DPO's and GRPO's references are the policy's
  // shared base weights. Two ranks for SFT, with activation checkpointing
  // (the layer's recomputation must reach the adapters); DPO under bf16-mixed.
  struct Plugin {
    std::string name;
    fs::path library;
    std::vector<nlohmann::json> data;
    std::string module;
    std::vector<std::string> overrides;
  };
  const std::vector<Plugin> plugins{
      {"sft", PTRAIN_SFT_PLUGIN, sft_data(), "loss_agg = \"token_mean\"\n", {"model.activation_checkpointing=true"}},
      {"dpo",
       PTRAIN_DPO_PLUGIN,
       dpo_data(),
       "loss = [\"sigmoid\", \"sft\"]\nloss_weights = [1, 0.5]\nbeta = 0.5\nreference_free = true\n",
       {"lora.target_modules=[\"q_proj\", \"v_proj\", \"down_proj\"]", "runtime.precision=\"bf16-mixed\""}},
      {"grpo", PTRAIN_GRPO_PLUGIN, grpo_data(), kGrpoModule, {}}};
  for (const Plugin& plugin : plugins) {
    DYNAMIC_SECTION(plugin.name) {
      const fs::path dir = scratch_dir("lora_" + plugin.name);
      ptrain::testing::ConformanceSpec spec;
      spec.plugin = plugin.library;
      spec.config = write_config(dir, plugin.data, plugin.module);
      spec.overrides = {"lora.rank=4", "lora.alpha=8.0"};
      spec.overrides.insert(spec.overrides.end(), plugin.overrides.begin(), plugin.overrides.end());
      if (plugin.name == "dpo" && bf16_products_round()) spec.tolerance = kRoundedBf16LoraTolerance;
      if (plugin.name == "sft") spec.zero_unit_examples = {kUntrainableSftExample};
      spec.work_dir = dir / "work";
      spec.check_world_size_2 = plugin.name == "sft";
      const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
      INFO(report.text());
      CHECK(report.passed());
      CHECK(report.checks.size() == (spec.check_world_size_2 ? 7u : 6u));
    }
  }
}

TEST_CASE("the harness names the check a plugin that normalises per microbatch fails", "[conformance]") {
  const fs::path dir = scratch_dir("broken");
  ptrain::testing::ConformanceSpec spec;
  spec.plugin = PTRAIN_BROKEN_PLUGIN;
  spec.config = write_config(dir, sft_data(), "loss_agg = \"token_mean\"\n");
  spec.zero_unit_examples = {kUntrainableSftExample};
  spec.work_dir = dir / "work";
  const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
  INFO(report.text());
  CHECK_FALSE(report.passed());
  const ptrain::testing::CheckResult* split = report.find("split_invariance");
  REQUIRE(split != nullptr);
  CHECK_FALSE(split->passed);
  CHECK_THAT(report.text(), Catch::Contains("FAIL split_invariance: the step differs from the single-microbatch step"));
  CHECK_THAT(split->detail, Catch::Contains("micro_size=1: relative gradient error"));
  // Two ranks split the batch too, so the real run disagrees as well.
  REQUIRE(report.find("world_size_2") != nullptr);
  CHECK_FALSE(report.find("world_size_2")->passed);
  // Its counts and metrics are the SFT ones: only the loss is wrong.
  CHECK(report.find("units_before_forward")->passed);
  CHECK(report.find("metric_reduction")->passed);
  // It counts its units inside microbatch_loss (count_loss_units reads the mask's sum back): a read per
  // microbatch, 4 microbatches of 2 examples.
  REQUIRE(report.find("no_scalar_reads") != nullptr);
  CHECK_FALSE(report.find("no_scalar_reads")->passed);
  CHECK_THAT(report.find("no_scalar_reads")->detail,
             Catch::Contains("microbatch_loss reads tensors back to the host") &&
                 Catch::Contains("4 reads in a loop of 4 microbatches"));
}

TEST_CASE("every bundled plugin passes the conformance harness under each sharding mode",
          "[conformance][sharding][bf16]") {
  // The two-rank run shards what it trains: "optimizer" the optimizer state,
  // "full" the decoder layers too (SFT's under bf16-mixed); the in-process
  // checks run as one rank, where both mean "none".
  const std::vector<BundledPlugin> plugins = bundled_plugins();
  for (const BundledPlugin& plugin : plugins) {
    for (const std::string mode : {"optimizer", "full"}) {
      DYNAMIC_SECTION(plugin.name << ", " << mode) {
        const fs::path dir = scratch_dir("sharding_" + mode + "_" + plugin.name);
        ptrain::testing::ConformanceSpec spec;
        spec.plugin = plugin.library;
        spec.config = write_config(dir, plugin.data, plugin.module);
        spec.overrides = {"distributed.sharding=\"" + mode + "\""};
        if (plugin.name == "sft" && mode == "full") {
          spec.overrides.push_back("runtime.precision=\"bf16-mixed\"");
          if (bf16_products_round()) spec.tolerance = kRoundedBf16Tolerance;
        }
        spec.work_dir = dir / "work";
        spec.check_world_size_2 = true;
        const ptrain::testing::ConformanceReport report = ptrain::testing::check_plugin_conformance(spec);
        INFO(report.text());
        CHECK(report.passed());
        REQUIRE(report.find("world_size_2") != nullptr);
        CHECK(report.find("world_size_2")->passed);
      }
    }
  }
}
