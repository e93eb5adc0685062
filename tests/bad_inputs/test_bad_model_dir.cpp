// Bad Hugging Face model directories: each a ModelError naming the directory
// or file and the tensor or config.json key; and bad JSON files that final/
// copies from model.init or beside tokenizer.path, each a ConfigError naming
// the file before the run starts.
#include "catch.h"

#include "bad_inputs/rejection.h"
#include "support/run_command.h"
#include "support/test_util.h"

#include "core/model/causal_lm.h"
#include "core/model/safetensors.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/output_model_files.h"

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

struct ModelDirCase {
  const char* name;
  // Spoils a freshly saved model directory, given its tensors and config.json.
  std::function<void(const fs::path& dir, NamedTensors& tensors, nlohmann::json& config)> spoil;
  std::string location;  // appended to the directory path
};

void write_json(const fs::path& path, const nlohmann::json& value) { std::ofstream(path) << value.dump(); }

}  // namespace

TEST_CASE("bad model directories are rejected naming the tensor or key", "[bad_inputs][model]") {
  const auto model = model::CausalLm::init_random(testing::tiny_model_config(), 3);
  const NamedTensors good = model->named_parameters();
  const std::string embed = "model.embed_tokens.weight";
  const std::string q_proj = "model.layers.0.self_attn.q_proj.weight";

  const std::vector<ModelDirCase> cases = {
      {"missing tensor", [&](const fs::path&, NamedTensors& t, nlohmann::json&) { t.erase(t.begin() + 1); },
       ": tensor '" + good[1].first + "' is missing"},
      {"wrong shape",
       [&](const fs::path&, NamedTensors& t, nlohmann::json&) {
         for (auto& [name, tensor] : t) {
           if (name == q_proj) tensor = at::zeros({32, 31});
         }
       },
       ": tensor '" + q_proj + "' has shape [32, 31], expected [32, 32]"},
      {"integer dtype",
       [&](const fs::path&, NamedTensors& t, nlohmann::json&) { t[0].second = t[0].second.to(at::kLong); },
       ": tensor '" + embed + "' has dtype Long"},
      {"a NaN in a weight",
       [&](const fs::path&, NamedTensors& t, nlohmann::json&) {
         for (auto& [name, tensor] : t) {
           if (name == q_proj) tensor = tensor.detach().clone().index_put_({0, 5}, std::nan(""));
         }
       },
       ": tensor '" + q_proj + "' holds 1 NaN or Inf values of 1024"},
      {"unexpected tensor",
       [&](const fs::path&, NamedTensors& t, nlohmann::json&) {
         t.emplace_back("model.layers.9.mlp.weight", at::zeros({2}));
       },
       ": unexpected tensors"},
      {"config.json larger than the weights",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["num_hidden_layers"] = 3; },
       ": tensor 'model.layers.2."},
      {"config.json vocabulary differs from the weights",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["vocab_size"] = 300; },
       ": tensor '" + embed + "' has shape [272, 32], expected [300, 32]"},
      {"config.json not JSON",
       [&](const fs::path& dir, NamedTensors&, nlohmann::json&) { std::ofstream(dir / "config.json") << "{\"a\": "; },
       "/config.json: not valid JSON"},
      {"config.json number past a double",
       [&](const fs::path& dir, NamedTensors&, nlohmann::json&) {
         std::ofstream(dir / "config.json") << "{\"a\": 1e400}";
       },
       "/config.json: not valid JSON"},
      {"config.json missing a key", [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c.erase("hidden_size"); },
       "/config.json: key 'hidden_size'"},
      {"config.json mistyped key",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["num_attention_heads"] = "four"; },
       "/config.json: key 'num_attention_heads'"},
      {"config.json unsupported model type",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["model_type"] = "gpt2"; },
       "/config.json: key 'model_type': unsupported model type \"gpt2\" (supported: llama, qwen2, qwen3, mistral)"},
      {"config.json heads that do not divide",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["num_key_value_heads"] = 3; },
       "/config.json: model config: num_heads (4) must be divisible by num_kv_heads (3)"},
      {"config.json rope scaling of another type",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
       },
       "/config.json: key 'rope_scaling.type': unsupported rope scaling type \"dynamic\" (supported: default, linear, "
       "llama3)"},
      {"config.json rope scaling yarn under rope_parameters",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 10000.0}};
       },
       "/config.json: key 'rope_parameters.rope_type': unsupported rope scaling type \"yarn\""},
      {"config.json rope scaling without a type",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_scaling"] = {{"factor", 2.0}};
       },
       "/config.json: key 'rope_scaling.rope_type': required but missing (supported: default, linear, llama3)"},
      {"config.json rope scaling not an object",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["rope_scaling"] = "llama3"; },
       "/config.json: key 'rope_scaling': expected an object or null"},
      {"config.json llama3 rope scaling missing a key",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_scaling"] = {
             {"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
       },
       "/config.json: key 'rope_scaling.original_max_position_embeddings': required but missing"},
      {"config.json llama3 rope scaling with equal frequency factors",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", 8.0},
                              {"low_freq_factor", 2.0},
                              {"high_freq_factor", 2.0},
                              {"original_max_position_embeddings", 8192}};
       },
       "/config.json: key 'rope_scaling': rope scaling: high_freq_factor (2) must be finite and greater than "
       "low_freq_factor (2)"},
      {"config.json linear rope scaling with a non-positive factor",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.0}};
       },
       "/config.json: key 'rope_scaling': rope scaling: factor must be a finite number > 0, got 0"},
      {"config.json linear rope scaling with a key of another type",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"attention_factor", 1.5}};
       },
       "/config.json: key 'rope_scaling.attention_factor': not supported with rope type \"linear\" (its keys: factor)"},
      {"config.json rope_parameters disagreeing with rope_scaling",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
         c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}};
       },
       "/config.json: key 'rope_parameters': disagrees with key 'rope_scaling'"},
      {"config.json mistral without sliding_window",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["model_type"] = "mistral"; },
       "/config.json: key 'sliding_window': required for mistral (null for full causal attention, or the window "
       "length)"},
      {"config.json mistral with a zero sliding_window",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["model_type"] = "mistral";
         c["sliding_window"] = 0;
       },
       "/config.json: key 'sliding_window': must be null or > 0, got 0"},
      {"config.json qwen2 with use_sliding_window",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) {
         c["model_type"] = "qwen2";
         c["use_sliding_window"] = true;
       },
       "/config.json: key 'use_sliding_window': sliding-window attention is supported for mistral only (qwen2 must "
       "have use_sliding_window false)"},
      {"qwen3 config.json without q_norm weights",
       [&](const fs::path&, NamedTensors&, nlohmann::json& c) { c["model_type"] = "qwen3"; },
       ": tensor 'model.layers.0.self_attn.q_norm.weight' is missing (expected shape [8])"},
      {"q_norm weights in a qwen2 model",
       [&](const fs::path&, NamedTensors& t, nlohmann::json&) {
         t.emplace_back("model.layers.0.self_attn.q_norm.weight", at::ones({8}));
       },
       ": unexpected tensors for a qwen2 model with this config: 'model.layers.0.self_attn.q_norm.weight'"},
      {"no config.json", [&](const fs::path& dir, NamedTensors&, nlohmann::json&) { fs::remove(dir / "config.json"); },
       "/config.json: cannot open"},
      {"no weights",
       [&](const fs::path& dir, NamedTensors&, nlohmann::json&) { fs::remove(dir / "model.safetensors"); },
       ": neither model.safetensors nor model.safetensors.index.json exists"},
      {"pickle weights only",
       [&](const fs::path& dir, NamedTensors&, nlohmann::json&) {
         fs::remove(dir / "model.safetensors");
         std::ofstream(dir / "pytorch_model.bin") << "\x80\x02}q\x00.";
       },
       ": neither model.safetensors nor model.safetensors.index.json exists (pytorch_model.bin is a pickle"},
      {"corrupt weights file",
       [&](const fs::path& dir, NamedTensors& t, nlohmann::json&) {
         fs::resize_file(dir / "model.safetensors", 100);
         t.clear();  // keep the cut file
       },
       "/model.safetensors: invalid safetensors file"},
      {"shard index without weight_map",
       [&](const fs::path& dir, NamedTensors&, nlohmann::json&) {
         fs::remove(dir / "model.safetensors");
         write_json(dir / "model.safetensors.index.json", {{"metadata", nlohmann::json::object()}});
       },
       "/model.safetensors.index.json: key 'weight_map'"},
      {"shard outside the model directory",
       [&](const fs::path& dir, NamedTensors&, nlohmann::json&) {
         fs::remove(dir / "model.safetensors");
         write_json(dir / "model.safetensors.index.json", {{"weight_map", {{embed, "../other/model.safetensors"}}}});
       },
       "/model.safetensors.index.json: weight_map['" + embed +
           "'] = \"../other/model.safetensors\" is not a file name"},
      {"tensor in two shards",
       [&](const fs::path& dir, NamedTensors& t, nlohmann::json&) {
         fs::remove(dir / "model.safetensors");
         model::write_safetensors(dir / "a.safetensors", t);
         model::write_safetensors(dir / "b.safetensors", {t[0]});
         write_json(dir / "model.safetensors.index.json",
                    {{"weight_map", {{embed, "b.safetensors"}, {t[1].first, "a.safetensors"}}}});
         t.clear();  // nothing more to write
       },
       ": tensor '" + embed + "' appears in more than one file"},
      {"index listing a tensor in a shard that lacks it",
       [&](const fs::path& dir, NamedTensors& t, nlohmann::json&) {
         fs::remove(dir / "model.safetensors");
         model::write_safetensors(dir / "a.safetensors", {t.begin(), t.begin() + 1});
         model::write_safetensors(dir / "b.safetensors", {t.begin() + 1, t.end()});
         nlohmann::json weight_map;
         for (size_t i = 0; i < t.size(); ++i) weight_map[t[i].first] = i == 0 ? "a.safetensors" : "b.safetensors";
         weight_map[t[2].first] = "a.safetensors";  // it is in b
         write_json(dir / "model.safetensors.index.json", {{"weight_map", weight_map}});
         t.clear();
       },
       "/a.safetensors: holds no tensor '" + good[2].first +
           "', which model.safetensors.index.json lists in this shard"},
  };
  for (const ModelDirCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path dir = testing::fresh_test_dir("bad_model_dir") / "model";
      model->save_hf_dir(dir);
      NamedTensors tensors = good;
      nlohmann::json config = model->config().to_hf_json();
      c.spoil(dir, tensors, config);
      if (!tensors.empty() && fs::exists(dir / "model.safetensors")) {
        model::write_safetensors(dir / "model.safetensors", tensors);
      }
      if (fs::exists(dir / "config.json") && config != model->config().to_hf_json())
        write_json(dir / "config.json", config);
      testing::check_rejected([&] { model::CausalLm::load_hf_dir(dir); }, "ModelError", dir.string() + c.location);
    }
  }
  const fs::path missing = testing::fresh_test_dir("bad_model_dir") / "nope";
  testing::check_rejected([&] { model::CausalLm::load_hf_dir(missing); }, "ModelError",
                          missing.string() + ": model directory does not exist");
}

TEST_CASE("bad files the output directory copies from model.init and tokenizer.path name the file",
          "[bad_inputs][model]") {
  struct FileCase {
    const char* name;
    const char* file;  // in the model directory or beside tokenizer.json
    std::string text;
    std::string location;  // appended to the file's path
  };
  const std::vector<FileCase> cases = {
      {"generation_config.json not JSON", "generation_config.json", "{\"do_sample\": tru", ": not valid JSON"},
      {"generation_config.json an array", "generation_config.json", "[1, 2]", ": expected a JSON object"},
      {"tokenizer_config.json an array", "tokenizer_config.json", "[]", ": expected a JSON object"},
  };
  const tokenizer::ByteTokenizer bytes;
  for (const FileCase& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path dir = testing::fresh_test_dir("bad_output_inputs");
      config::RunConfig config;
      config.model.init = (dir / "model").string();
      config.tokenizer.kind = config::TokenizerKind::kHf;
      config.tokenizer.path = (dir / "tokenizer.json").string();
      fs::create_directories(dir / "model");
      testing::write_text_file(dir, "tokenizer.json", "{}");
      const fs::path file = std::string(c.file) == "generation_config.json" ? dir / "model" / c.file : dir / c.file;
      testing::write_text_file(file.parent_path(), c.file, c.text);
      testing::check_rejected([&] { train::output_model_files(config, bytes); }, "ConfigError",
                              file.string() + c.location);
    }
  }
}
