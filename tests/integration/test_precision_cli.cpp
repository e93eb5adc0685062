// runtime.device, runtime.precision and checkpoint.save_dtype through
// `ptrain train` and `ptrain validate`: what final/ holds, what loads back,
// and that choosing the CPU explicitly changes nothing.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"
#include "core/train/compute_device.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using ptrain::testing::CommandResult;
using ptrain::testing::run_ptrain;

namespace {

// A 1-layer byte-level model trained 4 steps on the bundled arithmetic data;
// `model` is the [model] section's keys, `runtime` more [runtime] keys,
// `extra` further sections.
fs::path write_config(const fs::path& dir, const std::string& name, const std::string& model,
                      const std::string& runtime = "", const std::string& extra = "") {
  const fs::path path = dir / (name + ".toml");
  std::ofstream(path) << "plugin = \"sft\"\nseed = 1\noutput_dir = \"" << (dir / name).string() << "\"\n"
                      << "[model]\n"
                      << model << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR
                      << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\nmicro_size = 4\n"
                      << "[optim]\nlr = 1e-3\n"
                      << "[train]\nmax_steps = 4\nlog_every = 2\n"
                      << "[runtime]\nthreads = 1\n"
                      << runtime << extra;
  return path;
}

const std::string kSizes =
    "vocab_size = 259\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\n"
    "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n";

// A model directory stored in `dtype`, as a Hugging Face checkpoint of a bf16 model is.
fs::path write_model_dir(const fs::path& dir, at::ScalarType dtype) {
  const fs::path model_dir = dir / "init_model";
  ptrain::model::CausalLm::init_random(ptrain::testing::tiny_model_config(), 5)->save_hf_dir(model_dir, dtype);
  return model_dir;
}

std::string stored_dtype_of(const fs::path& model_dir) {
  const auto tensors = ptrain::model::read_safetensors(model_dir / "model.safetensors");
  REQUIRE_FALSE(tensors.empty());
  for (const auto& [name, tensor] : tensors) {
    INFO(name);
    CHECK(tensor.scalar_type() == tensors.front().second.scalar_type());
  }
  return c10::toString(tensors.front().second.scalar_type());
}

nlohmann::json config_json_of(const fs::path& model_dir) {
  std::ifstream in(model_dir / "config.json");
  return nlohmann::json::parse(in);
}

CommandResult train(const fs::path& config) { return run_ptrain("train -c " + config.string()); }

}  // namespace

TEST_CASE("a bf16 model is saved as bf16 by default, save_dtype overrides, and final/ loads back",
          "[e2e][precision][device][bf16]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("precision_save_dtype");
  const fs::path bf16_model = write_model_dir(dir, at::kBFloat16);
  const std::string init = "init = \"" + bf16_model.string() + "\"\n";

  struct Case {
    std::string name;
    std::string model;
    std::string runtime;
    std::string extra;
    std::string weights;      // c10's name of the stored dtype
    std::string torch_dtype;  // config.json
  };
  const std::string to_float32 = "[checkpoint]\nsave_dtype = \"float32\"\n";
  const std::string to_bfloat16 = "[checkpoint]\nsave_dtype = \"bfloat16\"\n";
  const std::string bf16_mixed = "precision = \"bf16-mixed\"\n";
  const std::vector<Case> cases{{"bf16_auto", init, "", "", "BFloat16", "bfloat16"},
                                {"bf16_to_float32", init, "", to_float32, "Float", "float32"},
                                {"fp32_auto", kSizes, "", "", "Float", "float32"},
                                {"fp32_to_bfloat16", kSizes, "", to_bfloat16, "BFloat16", "bfloat16"},
                                {"bf16_mixed_training", init, bf16_mixed, "", "BFloat16", "bfloat16"}};
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path config = write_config(dir, c.name, c.model, c.runtime, c.extra);
      const CommandResult result = train(config);
      INFO(result.output);
      REQUIRE(result.exit_code == 0);
      const fs::path final_dir = dir / c.name / "final";
      CHECK(stored_dtype_of(final_dir) == c.weights);
      CHECK(config_json_of(final_dir)["torch_dtype"] == c.torch_dtype);

      // final/ loads back, as the trained weights rounded to the stored dtype.
      const auto loaded = ptrain::model::CausalLm::load_hf_dir(final_dir);
      CHECK(loaded->stored_dtype() == (c.weights == "Float" ? at::kFloat : at::kBFloat16));
      const auto checkpoint_weights =
          ptrain::model::read_safetensors(dir / c.name / "checkpoints" / "step_4" / "model.safetensors");
      const auto final_weights = loaded->named_parameters();
      REQUIRE(checkpoint_weights.size() == final_weights.size());
      for (size_t i = 0; i < final_weights.size(); ++i) {
        INFO(final_weights[i].first);
        // Checkpoints keep the float32 master weights, whatever final/ holds.
        CHECK(checkpoint_weights[i].second.scalar_type() == at::kFloat);
        const at::Tensor rounded = checkpoint_weights[i].second.to(loaded->stored_dtype()).to(at::kFloat);
        CHECK(at::equal(final_weights[i].second.detach(), rounded));
      }
    }
  }
}

TEST_CASE("device = \"cpu\" trains bit for bit as the default, and validate says where it computes",
          "[e2e][precision]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("precision_device");
  const fs::path by_default = write_config(dir, "by_default", kSizes);
  const fs::path explicit_cpu = write_config(dir, "explicit_cpu", kSizes, "device = \"cpu\"\n");
  for (const fs::path& config : {by_default, explicit_cpu}) {
    const CommandResult result = train(config);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
  }
  CHECK(ptrain::testing::same_safetensors(dir / "by_default" / "final" / "model.safetensors",
                                          dir / "explicit_cpu" / "final" / "model.safetensors"));

  const CommandResult validated = run_ptrain("validate -c " + explicit_cpu.string());
  INFO(validated.output);
  CHECK(validated.exit_code == 0);
  CHECK_THAT(validated.output, Catch::Contains("compute    cpu (") && Catch::Contains("), fp32"));
}

TEST_CASE("device = \"cuda\" without a usable GPU stops before anything is written, naming the key",
          "[e2e][precision]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("precision_cuda");
  const fs::path config = write_config(dir, "on_cuda", kSizes, "device = \"cuda\"\n");
  if (ptrain::train::cuda_usable()) {
    // On a GPU machine the same config is valid: it computes on cuda:0.
    const CommandResult validated = run_ptrain("validate -c " + config.string());
    CHECK_THAT(validated.output, Catch::Contains("compute    cuda:0"));
    return;
  }
  for (const std::string command : {"validate", "train"}) {
    const CommandResult result = run_ptrain(command + " -c " + config.string());
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.output, Catch::Contains(config.string() + ": runtime.device = \"cuda\""));
    CHECK_THAT(result.output, Catch::Contains("\"auto\" or \"cpu\""));
  }
  CHECK_FALSE(fs::exists(dir / "on_cuda"));
}
