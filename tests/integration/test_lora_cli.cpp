// LoRA through the `ptrain` executable: a run on a model directory writes a
// PEFT adapter as final/ (and best/, and its checkpoints), merged/ holds the
// same model with ΔW folded in, a resumed run continues bit for bit, and a
// DPO run takes the base weights with the adapters off as its reference and
// continues from the SFT adapter.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/model/lora_adapter_dir.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

model::ModelConfig base_config() { return testing::byte_llama_config(32, 64, 2, 4, 2, 32); }

// SFT with adapters on every projection, dropout, activation checkpointing
// and packed rows, evaluated and checkpointed every 2 of 4 steps.
fs::path write_sft_config(const fs::path& dir, const fs::path& base) {
  const fs::path path = dir / "lora_sft.toml";
  std::ofstream(path) << "plugin = \"sft\"\nseed = 2\noutput_dir = \"" << (dir / "sft").string() << "\"\n"
                      << "[model]\ninit = \"" << base.string() << "\"\nactivation_checkpointing = true\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\nmicro_tokens = 32\npacking = true\n"
                      << "[optim]\nlr = 1e-2\n[train]\nmax_steps = 4\nlog_every = 2\n"
                      << "[checkpoint]\nevery_steps = 2\nbest_metric = \"eval/loss\"\n"
                      << "[eval]\ndata = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_examples = 16\n"
                      << "every_steps = 2\n"
                      << "[lora]\nrank = 4\nalpha = 8.0\ndropout = 0.1\nsave_merged = true\n"
                      << "[runtime]\nthreads = 1\n";
  return path;
}

at::Tensor logits_of(model::CausalLm& model) {
  const at::NoGradGuard no_grad;
  return model.logits(at::arange(2 * 12, at::kLong).remainder(200).add(40).view({2, 12}));
}

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(std::ifstream(path)); }

}  // namespace

TEST_CASE("a LoRA SFT run writes PEFT adapters, a merged model, and resumes exactly", "[integration][lora][device]") {
  const fs::path dir = testing::fresh_test_dir("lora_cli");
  const fs::path base = dir / "base";
  model::CausalLm::init_random(base_config(), 5)->save_hf_dir(base);
  const fs::path config = write_sft_config(dir, base);
  const testing::CommandResult run = testing::run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(testing::contains(run.output, "[lora] rank 4"));

  // final/, best/ and the checkpoints are adapter directories, not models.
  const fs::path final_dir = dir / "sft" / "final";
  for (const fs::path& adapter : {final_dir, dir / "sft" / "best", dir / "sft" / "checkpoints" / "step_2"}) {
    INFO(adapter);
    CHECK(fs::exists(adapter / "adapter_model.safetensors"));
    CHECK_FALSE(fs::exists(adapter / "model.safetensors"));
    CHECK_FALSE(fs::exists(adapter / "config.json"));
  }
  const nlohmann::json adapter_config = read_json(final_dir / "adapter_config.json");
  CHECK(adapter_config.at("peft_type") == "LORA");
  CHECK(adapter_config.at("r") == 4);
  CHECK(adapter_config.at("lora_alpha") == 8.0);
  CHECK(adapter_config.at("lora_dropout") == 0.1);
  CHECK(adapter_config.at("target_modules").size() == 7u);
  CHECK(adapter_config.at("base_model_name_or_path") == base.string());

  // merged/ = the base with the trained adapters, as one model directory.
  auto adapted = model::CausalLm::load_hf_dir(base);
  adapted->add_lora({4, 8.0, 0.1, {model::all_lora_targets().begin(), model::all_lora_targets().end()}}, 0);
  const at::Tensor base_logits = logits_of(*adapted);
  model::load_lora_adapter_dir(*adapted, final_dir);
  const at::Tensor adapted_logits = logits_of(*adapted);
  CHECK_FALSE(at::allclose(adapted_logits, base_logits));  // training moved the adapters
  auto merged = model::CausalLm::load_hf_dir(final_dir / "merged");
  CHECK(at::allclose(logits_of(*merged), adapted_logits, 1e-4, 1e-5));

  // Resumed from step 2 elsewhere: the same adapters, bit for bit (dropout masks included).
  const testing::CommandResult resumed =
      testing::run_ptrain("train -c " + config.string() + " --set output_dir=\"" + (dir / "resumed").string() +
                          "\" --resume " + (dir / "sft" / "checkpoints" / "step_2").string() + " 2>&1");
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(testing::same_safetensors(dir / "resumed" / "final" / "adapter_model.safetensors",
                                  final_dir / "adapter_model.safetensors"));
}

TEST_CASE("a LoRA DPO run uses the base weights as its reference and continues from an adapter",
          "[integration][lora][device]") {
  const fs::path dir = testing::fresh_test_dir("lora_dpo_cli");
  const fs::path base = dir / "base";
  model::CausalLm::init_random(base_config(), 6)->save_hf_dir(base);
  const testing::CommandResult sft =
      testing::run_ptrain("train -c " + write_sft_config(dir, base).string() +
                          " --set lora.target_modules='[\"q_proj\",\"v_proj\"]' --set lora.save_merged=false 2>&1");
  INFO(sft.output);
  REQUIRE(sft.exit_code == 0);

  const fs::path config = dir / "lora_dpo.toml";
  std::ofstream(config) << "plugin = \"dpo\"\nseed = 2\noutput_dir = \"" << (dir / "dpo").string() << "\"\n"
                        << "[model]\ninit = \"" << base.string() << "\"\n"
                        << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR
                        << "/data/arith_prefs/train.jsonl\"\nmax_length = 16\n"
                        << "[batch]\nglobal_size = 4\n[optim]\nlr = 1e-2\n[train]\nmax_steps = 2\n"
                        << "[lora]\nrank = 4\nalpha = 8.0\ndropout = 0.1\ntarget_modules = [\"q_proj\", \"v_proj\"]\n"
                        << "init = \"" << (dir / "sft" / "final").string() << "\"\n"
                        << "[runtime]\nthreads = 1\n"
                        << "[module]\nbeta = 0.1\nreference_model = \"" << base.string() << "\"\n";
  const testing::CommandResult dpo = testing::run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(dpo.output);
  REQUIRE(dpo.exit_code == 0);
  CHECK(testing::contains(dpo.output, "continuing from " + (dir / "sft" / "final").string()));
  CHECK(testing::contains(dpo.output, "is the policy's base: its weights with the adapters off (shared, not copied)"));
  // The SFT adapter differs from the base, so the first step's rewards are not all zero.
  const auto metrics = testing::read_metrics_jsonl(dir / "dpo" / "metrics.jsonl");
  REQUIRE_FALSE(metrics.empty());
  CHECK(metrics[0].at("rewards/margins").get<double>() != 0.0);
  CHECK(fs::exists(dir / "dpo" / "final" / "adapter_model.safetensors"));
}
