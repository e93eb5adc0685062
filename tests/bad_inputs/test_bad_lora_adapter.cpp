// `ptrain train` with a lora.init adapter directory that does not fit: each
// refused before training starts (no run directory), naming the file and the
// key or tensor, with what was expected.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/model/lora_adapter_dir.h"
#include "core/model/safetensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace ptrain;
namespace fs = std::filesystem;

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The run's model: [model] sizes below.
model::ModelConfig run_model_config() { return testing::byte_llama_config(16, 32, 1, 2, 1, 32); }

fs::path write_lora_config(const fs::path& dir, const fs::path& adapter) {
  const fs::path train =
      testing::write_text_file(dir, "train.jsonl", "{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n");
  const fs::path path = dir / "lora.toml";
  std::ofstream(path) << "plugin = \"sft\"\noutput_dir = \"" << (dir / "run").string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 16\nintermediate_size = 32\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << train.string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 1\n[train]\nmax_steps = 1\n[runtime]\nthreads = 1\n"
                      << "[lora]\nrank = 2\nalpha = 4.0\ninit = \"" << adapter.string() << "\"\n";
  return path;
}

struct AdapterCase {
  const char* name;
  // Spoils a freshly saved adapter directory (rank 2, alpha 4, all targets).
  std::function<void(NamedTensors& tensors, nlohmann::json& config)> spoil;
  std::string message;  // after the directory
};

}  // namespace

TEST_CASE("train refuses a lora.init adapter that does not fit the run", "[bad_inputs][model][lora]") {
  const std::string q_b = model::lora_key(0, model::LoraTarget::kQ, 'B');
  const std::vector<AdapterCase> cases = {
      {"another rank", [](NamedTensors&, nlohmann::json& c) { c["r"] = 8; },
       "/adapter_config.json: r = 8, but lora.rank = 2"},
      {"another alpha", [](NamedTensors&, nlohmann::json& c) { c["lora_alpha"] = 16; },
       "/adapter_config.json: lora_alpha = 16.0, but lora.alpha = 4.0"},
      {"not a LoRA adapter", [](NamedTensors&, nlohmann::json& c) { c["peft_type"] = "IA3"; },
       "/adapter_config.json: key 'peft_type' = \"IA3\", expected \"LORA\""},
      {"trained biases", [](NamedTensors&, nlohmann::json& c) { c["bias"] = "all"; },
       "/adapter_config.json: key 'bias' = \"all\", expected \"none\""},
      {"unknown target module",
       [](NamedTensors&, nlohmann::json& c) {
         c["target_modules"] = {"q_proj", "fc1"};
       },
       "/adapter_config.json: target_modules entry \"fc1\" is not one of"},
      {"fewer target modules", [](NamedTensors&, nlohmann::json& c) { c["target_modules"] = {"q_proj"}; },
       "/adapter_config.json: target_modules = [q_proj], but lora.target_modules = [q_proj, k_proj"},
      {"a tensor of the wrong shape",
       [&](NamedTensors& t, nlohmann::json&) {
         for (auto& [name, tensor] : t) {
           if (name == q_b) tensor = at::zeros({16, 3});
         }
       },
       "/adapter_model.safetensors: tensor '" + q_b + "' has shape [16, 3], expected [16, 2]"},
      {"a missing tensor", [](NamedTensors& t, nlohmann::json&) { t.pop_back(); },
       "/adapter_model.safetensors: tensor '" + model::lora_key(0, model::LoraTarget::kDown, 'B') + "' is missing"},
      {"an unexpected tensor",
       [](NamedTensors& t, nlohmann::json&) {
         t.emplace_back("base_model.model.lm_head.lora_A.weight", at::zeros({2, 16}));
       },
       "/adapter_model.safetensors: unexpected tensor 'base_model.model.lm_head.lora_A.weight'"},
      // PEFT options that change what the adapter computes: honoured (use_rslora) or refused by name.
      {"rsLoRA for a run without it", [](NamedTensors&, nlohmann::json& c) { c["use_rslora"] = true; },
       "/adapter_config.json: use_rslora = true, but lora.use_rslora = false"},
      {"use_rslora not a boolean", [](NamedTensors&, nlohmann::json& c) { c["use_rslora"] = "yes"; },
       "/adapter_config.json: key 'use_rslora' = \"yes\", expected true or false"},
      {"per-module ranks",
       [](NamedTensors&, nlohmann::json& c) {
         c["rank_pattern"] = {{"q_proj", 4}};
       },
       "/adapter_config.json: key 'rank_pattern' = {\"q_proj\":4}: per-module ranks are not supported"},
      {"per-module alphas",
       [](NamedTensors&, nlohmann::json& c) {
         c["alpha_pattern"] = {{"model.layers.0.mlp.down_proj", 8}};
       },
       "/adapter_config.json: key 'alpha_pattern' = {\"model.layers.0.mlp.down_proj\":8}: per-module alphas are "
       "not supported"},
      {"DoRA", [](NamedTensors&, nlohmann::json& c) { c["use_dora"] = true; },
       "/adapter_config.json: key 'use_dora' = true: DoRA (weight-decomposed LoRA) is not supported"},
      {"some layers only", [](NamedTensors&, nlohmann::json& c) { c["layers_to_transform"] = 0; },
       "/adapter_config.json: key 'layers_to_transform' = 0: adapting only some layers is not supported"},
      {"modules trained in full", [](NamedTensors&, nlohmann::json& c) { c["modules_to_save"] = {"lm_head"}; },
       "/adapter_config.json: key 'modules_to_save' = [\"lm_head\"]"},
      {"a NaN in an adapter tensor",
       [&](NamedTensors& t, nlohmann::json&) {
         for (auto& [name, tensor] : t) {
           if (name == q_b) tensor = tensor.detach().clone().index_put_({3, 1}, std::nan(""));
         }
       },
       "/adapter_model.safetensors: tensor '" + q_b + "' holds 1 NaN or Inf values of 32"},
      {"an Inf in an adapter tensor",
       [&](NamedTensors& t, nlohmann::json&) {
         for (auto& [name, tensor] : t) {
           if (name == q_b) tensor = at::full({16, 2}, INFINITY);
         }
       },
       "/adapter_model.safetensors: tensor '" + q_b + "' holds 32 NaN or Inf values of 32"}};

  for (const AdapterCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path dir = testing::fresh_test_dir("bad_lora_adapter");
      const fs::path adapter = dir / "adapter";
      auto model = model::CausalLm::init_random(run_model_config(), 0);
      const auto& targets = model::all_lora_targets();
      model->add_lora({2, 4.0, 0.0, {targets.begin(), targets.end()}}, 1);
      model::save_lora_adapter_dir(*model, adapter, at::kFloat);
      NamedTensors tensors = model->named_parameters();
      nlohmann::json config = nlohmann::json::parse(std::ifstream(adapter / "adapter_config.json"));
      c.spoil(tensors, config);
      model::write_safetensors(adapter / "adapter_model.safetensors", tensors);
      std::ofstream(adapter / "adapter_config.json") << config.dump(2);

      const testing::CommandResult result =
          testing::run_ptrain("train -c " + write_lora_config(dir, adapter).string() + " 2>&1");
      INFO(result.output);
      CHECK(result.exit_code != 0);
      CHECK(testing::contains(result.output, adapter.string() + c.message));
      CHECK_FALSE(fs::exists(dir / "run"));
    }
  }
}

TEST_CASE("train refuses an adapter directory as model.init, saying what to do instead", "[bad_inputs][model][lora]") {
  const fs::path dir = testing::fresh_test_dir("lora_adapter_as_model");
  auto model = model::CausalLm::init_random(run_model_config(), 0);
  model->add_lora({2, 4.0, 0.0, {model::LoraTarget::kQ}}, 1);
  model::save_lora_adapter_dir(*model, dir / "adapter", at::kFloat);
  const fs::path train =
      testing::write_text_file(dir, "train.jsonl", "{\"prompt\": \"1+1=\", \"completion\": \"2\"}\n");
  const fs::path config =
      testing::write_text_file(dir, "adapter_as_model.toml",
                               "plugin = \"sft\"\noutput_dir = \"" + (dir / "run").string() + "\"\n[model]\ninit = \"" +
                                   (dir / "adapter").string() + "\"\n[data]\ntrain = \"" + train.string() +
                                   "\"\nmax_length = 16\n[batch]\nglobal_size = 1\n[train]\nmax_steps = 1\n");
  const testing::CommandResult result = testing::run_ptrain("train -c " + config.string() + " 2>&1");
  INFO(result.output);
  CHECK(result.exit_code != 0);
  CHECK(testing::contains(result.output, (dir / "adapter").string() + ": a LoRA adapter directory, not a model"));
  CHECK_FALSE(fs::exists(dir / "run"));
}

TEST_CASE("train refuses a lora.init directory without adapter_config.json", "[bad_inputs][model][lora]") {
  const fs::path dir = testing::fresh_test_dir("bad_lora_adapter_files");
  fs::create_directories(dir / "adapter");
  const testing::CommandResult result =
      testing::run_ptrain("train -c " + write_lora_config(dir, dir / "adapter").string() + " 2>&1");
  INFO(result.output);
  CHECK(result.exit_code != 0);
  CHECK(testing::contains(result.output, (dir / "adapter" / "adapter_config.json").string() + ": cannot open"));
  CHECK_FALSE(fs::exists(dir / "run"));
}
