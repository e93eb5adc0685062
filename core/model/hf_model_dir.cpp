// Hugging Face model directories (config.json with model.safetensors or
// its shards) read into a CausalLm and written from one.
#include "core/model/hf_model_dir.h"

#include "core/model/causal_lm.h"
#include "core/model/finite_weights.h"
#include "core/model/parameter_names.h"
#include "core/model/safetensors.h"
#include "core/model/shape_text.h"
#include "core/model/sharded_weights.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <utility>

namespace ptrain::model {
namespace {

namespace fs = std::filesystem;
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

nlohmann::json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw sdk::ModelError(path.string() + ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number past a double
    throw sdk::ModelError(path.string() + ": not valid JSON: " + e.what());
  }
}

// A stored weight as float32 on `device`. Moved in the stored dtype, widened
// on the device: a bf16 checkpoint crosses to the GPU at half the bytes, and
// no float32 copy of the whole model is ever held on the host.
at::Tensor float_on_device(const fs::path& dir, const std::string& name, const at::Tensor& t, at::Device device) {
  if (!at::isFloatingType(t.scalar_type())) {
    throw sdk::ModelError(dir.string() + ": tensor '" + name + "' has dtype " + c10::toString(t.scalar_type()) +
                          ", expected a floating type");
  }
  require_finite_weights(t, name, dir.string());
  return t.to(device).to(at::kFloat).contiguous();
}
}  // namespace

// model.safetensors, or the shards named by model.safetensors.index.json.
NamedTensors read_model_tensors(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors";
  if (fs::exists(single)) return read_safetensors(single);

  const fs::path index_path = dir / "model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    // Pickle (pytorch_model.bin) and TorchScript files can run code when
    // loaded; only safetensors, which is plain data, is ever read.
    const bool pickle = fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json");
    throw sdk::ModelError(dir.string() + ": neither model.safetensors nor model.safetensors.index.json exists" +
                          (pickle ? " (pytorch_model.bin is a pickle, which ptrain never loads because unpickling "
                                    "can run code: convert it to safetensors)"
                                  : ""));
  }
  const nlohmann::json index = read_json_file(index_path);
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw sdk::ModelError(index_path.string() + ": key 'weight_map': missing or not an object");
  }
  std::vector<std::string> shards;
  std::map<std::string, std::set<std::string>> listed;  // shard → the tensors the index puts there
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) throw sdk::ModelError(index_path.string() + ": weight_map['" + name + "'] is not a string");
    const std::string shard = file.get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      throw sdk::ModelError(index_path.string() + ": weight_map['" + name + "'] = \"" + shard +
                            "\" is not a file name in the model directory");
    }
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    listed[shard].insert(name);
  }
  NamedTensors all;
  for (const std::string& shard : shards) {
    NamedTensors part = read_safetensors(dir / shard);
    std::set<std::string> missing = listed[shard];
    for (const auto& [name, tensor] : part) missing.erase(name);
    if (!missing.empty()) {
      throw sdk::ModelError((dir / shard).string() + ": holds no tensor '" + *missing.begin() + "', which " +
                            index_path.filename().string() + " lists in this shard");
    }
    std::move(part.begin(), part.end(), std::back_inserter(all));
  }
  return all;
}

// config.json's torch_dtype for the dtypes save_hf_dir writes.
std::string torch_dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    default:
      throw sdk::ModelError(std::string("cannot save model weights as ") + c10::toString(dtype));
  }
}

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_parameters(const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  const int64_t q_dim = c.num_heads * c.resolved_head_dim();
  const int64_t kv_dim = c.num_kv_heads * c.resolved_head_dim();
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  // transformers' module order within a decoder layer.
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "self_attn.q_proj.weight", {q_dim, h}});
    if (c.qkv_bias) out.push_back({p + "self_attn.q_proj.bias", {q_dim}});
    out.push_back({p + "self_attn.k_proj.weight", {kv_dim, h}});
    if (c.qkv_bias) out.push_back({p + "self_attn.k_proj.bias", {kv_dim}});
    out.push_back({p + "self_attn.v_proj.weight", {kv_dim, h}});
    if (c.qkv_bias) out.push_back({p + "self_attn.v_proj.bias", {kv_dim}});
    out.push_back({p + "self_attn.o_proj.weight", {h, q_dim}});
    if (c.o_bias) out.push_back({p + "self_attn.o_proj.bias", {h}});
    if (c.has_qk_norm()) {  // registered after o_proj in Qwen3Attention
      out.push_back({p + "self_attn.q_norm.weight", {c.resolved_head_dim()}});
      out.push_back({p + "self_attn.k_norm.weight", {c.resolved_head_dim()}});
    }
    out.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, h}});
    out.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, c.intermediate_size}});
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

std::unique_ptr<CausalLm> CausalLm::load_hf_dir(const std::filesystem::path& dir, at::Device device) {
  if (!fs::is_directory(dir)) throw sdk::ModelError(dir.string() + ": model directory does not exist");
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path) && fs::exists(dir / "adapter_config.json")) {
    throw sdk::ModelError(dir.string() +
                          ": a LoRA adapter directory, not a model: start from its base model (model.init) with "
                          "lora.init = this directory, or from its merged/ model (lora.save_merged)");
  }
  const ModelConfig config = ModelConfig::from_hf_json(read_json_file(config_path), config_path.string());

  std::map<std::string, at::Tensor> rest;
  std::unique_ptr<CausalLm> model = load_hf_decoder(dir, config, device, rest);
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : rest) {
    // Older checkpoints store the rotary buffer; it is recomputed from rope_theta.
    if (ends_with(name, ".rotary_emb.inv_freq")) continue;
    // Some exporters write the tied head anyway; accept only an exact copy.
    if (config.tie_word_embeddings && name == "lm_head.weight") {
      const at::Tensor& embed = model->embed_tokens_;
      if (tensor.sizes() != embed.sizes() || !at::equal(float_on_device(dir, name, tensor, device), embed.detach())) {
        throw sdk::ModelError(dir.string() + ": tensor '" + name +
                              "' differs from model.embed_tokens.weight although tie_word_embeddings is true");
      }
      continue;
    }
    unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 5; ++i) list += (i ? ", '" : "'") + unexpected[i] + "'";
    if (unexpected.size() > 5) list += ", ... (" + std::to_string(unexpected.size()) + " in all)";
    throw sdk::ModelError(dir.string() + ": unexpected tensors for a " + config.model_type +
                          " model with this config: " + list);
  }
  return model;
}

std::unique_ptr<CausalLm> CausalLm::load_hf_decoder(const std::filesystem::path& dir, const ModelConfig& config,
                                                    at::Device device, std::map<std::string, at::Tensor>& rest) {
  rest.clear();
  for (auto& [name, tensor] : read_model_tensors(dir)) {
    if (!rest.emplace(name, std::move(tensor)).second) {
      throw sdk::ModelError(dir.string() + ": tensor '" + name + "' appears in more than one file");
    }
  }
  NamedTensors params;
  at::ScalarType loaded_dtype = at::kFloat;
  for (const auto& [name, shape] : expected_parameters(config)) {
    auto it = rest.find(name);
    if (it == rest.end()) {
      throw sdk::ModelError(dir.string() + ": tensor '" + name + "' is missing (expected shape " + shape_text(shape) +
                            ")");
    }
    if (it->second.sizes() != at::IntArrayRef(shape)) {
      throw sdk::ModelError(dir.string() + ": tensor '" + name + "' has shape " + shape_text(it->second.sizes()) +
                            ", expected " + shape_text(shape));
    }
    if (params.empty()) loaded_dtype = it->second.scalar_type();
    params.emplace_back(name, float_on_device(dir, name, it->second, device).requires_grad_(true));
    rest.erase(it);
  }
  auto model = std::unique_ptr<CausalLm>(new CausalLm(config, std::move(params)));
  model->stored_dtype_ = loaded_dtype;
  model->source_dir_ = dir;
  return model;
}

void CausalLm::save_hf_dir(const std::filesystem::path& dir, at::ScalarType dtype) const {
  save_hf_dir(dir, dtype, SaveOptions{});
}

void CausalLm::save_hf_dir(const std::filesystem::path& dir, at::ScalarType dtype, const SaveOptions& options) const {
  save_hf_config(dir, dtype, options);
  NamedTensors tensors;
  tensors.reserve(params_.size());
  for (const auto& [name, t] : params_) tensors.emplace_back(name, t.detach().to(at::kCPU, dtype).contiguous());
  write_model_weights(dir, tensors, options.max_shard_bytes);
}

void CausalLm::save_hf_config(const std::filesystem::path& dir, at::ScalarType dtype,
                              const SaveOptions& options) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw sdk::ModelError(dir.string() + ": cannot create model directory: " + ec.message());

  const fs::path config_path = dir / "config.json";
  std::ofstream out(config_path);
  nlohmann::json config_json = config().to_hf_json(torch_dtype_name(dtype));
  config_json.update(options.config_fields);
  out << config_json.dump(2) << "\n";
  out.flush();
  if (!out) throw sdk::ModelError(config_path.string() + ": write failed");
}

}  // namespace ptrain::model
