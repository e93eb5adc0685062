#include "core/model/model_config.h"

#include "ptrain/sdk/errors.h"

#include <cmath>
#include <sstream>

namespace ptrain::model {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& message) { throw sdk::ModelError(message); }

void require_positive(int64_t value, const char* name) {
  if (value <= 0) {
    fail(std::string("model config: ") + name + " must be > 0, got " + std::to_string(value));
  }
}

void require_positive_finite(double value, const char* name) {
  if (!(value > 0.0) || !std::isfinite(value)) {
    std::ostringstream out;
    out << "model config: " << name << " must be a finite number > 0, got " << value;
    fail(out.str());
  }
}

// Typed access to config.json keys: every error names the file and the key.
class HfReader {
 public:
  HfReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  [[noreturn]] void fail_key(const std::string& key, const std::string& what) const {
    fail(source_ + ": key '" + key + "': " + what);
  }

  // Present and not null.
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t get_int(const std::string& key) const {
    if (!has(key)) fail_key(key, "required but missing");
    return as_int(key, j_.at(key));
  }
  int64_t get_int(const std::string& key, int64_t fallback) const {
    return has(key) ? as_int(key, j_.at(key)) : fallback;
  }
  double get_double(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number()) fail_key(key, "expected a number, got " + v.dump());
    return v.get<double>();
  }
  bool get_bool(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) fail_key(key, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string get_string(const std::string& key) const {
    if (!has(key)) fail_key(key, "required but missing");
    const json& v = j_.at(key);
    if (!v.is_string()) fail_key(key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  const json& at(const std::string& key) const { return j_.at(key); }

 private:
  int64_t as_int(const std::string& key, const json& v) const {
    if (!v.is_number_integer()) fail_key(key, "expected an integer, got " + v.dump());
    return v.get<int64_t>();
  }

  const json& j_;
  const std::string& source_;
};

}  // namespace

int64_t ModelConfig::resolved_head_dim() const {
  if (head_dim != 0) return head_dim;
  return num_heads > 0 ? hidden_size / num_heads : 0;
}

void ModelConfig::validate() const {
  if (model_type != "llama" && model_type != "qwen2") {
    fail("model config: model_type must be \"llama\" or \"qwen2\", got \"" + model_type + "\"");
  }
  require_positive(vocab_size, "vocab_size");
  require_positive(hidden_size, "hidden_size");
  require_positive(intermediate_size, "intermediate_size");
  require_positive(num_layers, "num_layers (num_hidden_layers)");
  require_positive(num_heads, "num_heads (num_attention_heads)");
  require_positive(num_kv_heads, "num_kv_heads (num_key_value_heads)");
  require_positive(max_position_embeddings, "max_position_embeddings");
  if (head_dim < 0)
    fail("model config: head_dim must be >= 0 (0: hidden_size / num_heads), got " + std::to_string(head_dim));
  if (head_dim == 0 && hidden_size % num_heads != 0) {
    fail("model config: hidden_size (" + std::to_string(hidden_size) + ") must be divisible by num_heads (" +
         std::to_string(num_heads) + ") unless head_dim is set");
  }
  if (num_heads % num_kv_heads != 0) {
    fail("model config: num_heads (" + std::to_string(num_heads) + ") must be divisible by num_kv_heads (" +
         std::to_string(num_kv_heads) + ")");
  }
  // Rotate-half pairs dimension i with i + d/2.
  if (resolved_head_dim() % 2 != 0) {
    fail("model config: head dimension must be even for rotary embeddings, got " + std::to_string(resolved_head_dim()));
  }
  require_positive_finite(rope_theta, "rope_theta");
  require_positive_finite(rms_norm_eps, "rms_norm_eps");
  // config.json can only express these bias layouts.
  if (model_type == "qwen2" && (!qkv_bias || o_bias)) {
    fail("model config: qwen2 has q/k/v biases and no o_proj bias (qkv_bias = true, o_bias = false)");
  }
  if (model_type == "llama" && qkv_bias != o_bias) {
    fail("model config: llama's attention_bias sets both qkv_bias and o_bias; they must be equal");
  }
}

nlohmann::json ModelConfig::to_hf_json(const std::string& torch_dtype) const {
  json j;
  const bool llama = model_type == "llama";
  j["architectures"] = json::array({llama ? "LlamaForCausalLM" : "Qwen2ForCausalLM"});
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_layers;
  j["num_attention_heads"] = num_heads;
  j["num_key_value_heads"] = num_kv_heads;
  j["head_dim"] = resolved_head_dim();
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  j["rope_scaling"] = nullptr;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  if (llama) {
    j["attention_bias"] = qkv_bias;
    j["mlp_bias"] = false;
  } else {
    j["use_sliding_window"] = false;
  }
  return j;
}

ModelConfig ModelConfig::from_hf_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail(source + ": expected a JSON object, got " + std::string(j.type_name()));
  const HfReader r(j, source);
  ModelConfig c;
  c.model_type = r.get_string("model_type");
  const bool llama = c.model_type == "llama";
  if (!llama && c.model_type != "qwen2") {
    r.fail_key("model_type", "unsupported model type \"" + c.model_type + "\" (supported: llama, qwen2)");
  }

  c.vocab_size = r.get_int("vocab_size");
  c.hidden_size = r.get_int("hidden_size");
  c.intermediate_size = r.get_int("intermediate_size");
  c.num_layers = r.get_int("num_hidden_layers");
  c.num_heads = r.get_int("num_attention_heads");
  c.num_kv_heads = r.get_int("num_key_value_heads", c.num_heads);
  c.head_dim = r.get_int("head_dim", 0);
  c.max_position_embeddings = r.get_int("max_position_embeddings", llama ? 2048 : 32768);
  c.rms_norm_eps = r.get_double("rms_norm_eps", 1e-6);
  c.rope_theta = r.get_double("rope_theta", 10000.0);
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  if (llama) {
    c.qkv_bias = c.o_bias = r.get_bool("attention_bias", false);
  } else {
    c.qkv_bias = true;
    c.o_bias = false;
  }

  // Everything below would change the computation in transformers; refusing
  // is better than silently producing a different model.
  if (r.has("hidden_act") && r.get_string("hidden_act") != "silu") {
    r.fail_key("hidden_act", "only \"silu\" is supported, got " + r.at("hidden_act").dump());
  }
  if (r.has("rope_scaling")) {
    r.fail_key("rope_scaling", "rope scaling is not supported (must be null), got " + r.at("rope_scaling").dump());
  }
  // transformers >= 5 moves rope_theta into rope_parameters.
  if (r.has("rope_parameters")) {
    const json& rp = r.at("rope_parameters");
    if (!rp.is_object()) r.fail_key("rope_parameters", "expected an object, got " + rp.dump());
    const HfReader rpr(rp, source);
    const std::string type = rpr.has("rope_type") ? rpr.get_string("rope_type") : "default";
    if (type != "default") {
      r.fail_key("rope_parameters", "only rope_type \"default\" is supported, got \"" + type + "\"");
    }
    c.rope_theta = rpr.get_double("rope_theta", c.rope_theta);
  }
  if (r.get_bool("mlp_bias", false)) r.fail_key("mlp_bias", "MLP biases are not supported");
  if (r.get_bool("use_sliding_window", false)) {
    r.fail_key("use_sliding_window", "sliding-window attention is not supported");
  }
  if (r.get_double("attention_dropout", 0.0) != 0.0) {
    r.fail_key("attention_dropout", "attention dropout is not supported (must be 0)");
  }
  if (r.get_double("partial_rotary_factor", 1.0) != 1.0) {
    r.fail_key("partial_rotary_factor", "partial rotary embeddings are not supported (must be 1)");
  }
  if (r.has("quantization_config")) r.fail_key("quantization_config", "quantized models are not supported");

  try {
    c.validate();
  } catch (const sdk::ModelError& e) {
    fail(source + ": " + e.what());
  }
  return c;
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return vocab_size == o.vocab_size && hidden_size == o.hidden_size && intermediate_size == o.intermediate_size &&
         num_layers == o.num_layers && num_heads == o.num_heads && num_kv_heads == o.num_kv_heads &&
         resolved_head_dim() == o.resolved_head_dim() && max_position_embeddings == o.max_position_embeddings &&
         rope_theta == o.rope_theta && rms_norm_eps == o.rms_norm_eps && tie_word_embeddings == o.tie_word_embeddings &&
         qkv_bias == o.qkv_bias && o_bias == o.o_bias && model_type == o.model_type;
}

}  // namespace ptrain::model
