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
  // Present, possibly null.
  bool contains(const std::string& key) const { return j_.contains(key); }
  const std::string& source() const { return source_; }

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

constexpr const char* kSupportedTypes = "llama, qwen2, qwen3, mistral";

bool is_supported_model_type(const std::string& type) {
  return type == "llama" || type == "qwen2" || type == "qwen3" || type == "mistral";
}

const char* architecture_of(const std::string& type) {
  if (type == "qwen2") return "Qwen2ForCausalLM";
  if (type == "qwen3") return "Qwen3ForCausalLM";
  if (type == "mistral") return "MistralForCausalLM";
  return "LlamaForCausalLM";
}

// transformers' defaults for max_position_embeddings per config class.
int64_t default_max_positions(const std::string& type) {
  if (type == "llama") return 2048;
  if (type == "mistral") return 4096 * 32;
  return 32768;  // qwen2, qwen3
}

// Biases and sliding window, whose keys differ per family.
void read_family_keys(const HfReader& r, ModelConfig& c) {
  if (c.model_type == "qwen2") {
    c.qkv_bias = true;
    c.o_bias = false;
  } else if (c.model_type == "llama" || c.model_type == "qwen3") {
    c.qkv_bias = c.o_bias = r.get_bool("attention_bias", false);
  }
  if (c.model_type == "mistral") {
    // MistralConfig's default is 4096 while current checkpoints write null:
    // a missing key is ambiguous, so it is required.
    if (!r.contains("sliding_window")) {
      r.fail_key("sliding_window", "required for mistral (null for full causal attention, or the window length)");
    }
    c.sliding_window = r.get_int("sliding_window", 0);
    if (c.sliding_window <= 0 && r.has("sliding_window")) {
      r.fail_key("sliding_window", "must be null or > 0, got " + std::to_string(c.sliding_window));
    }
  } else if (r.get_bool("use_sliding_window", false)) {
    // Qwen's windows apply to layers from max_window_layers on: not implemented.
    r.fail_key("use_sliding_window", "sliding-window attention is supported for mistral only (" + c.model_type +
                                         " must have use_sliding_window false)");
  }
}

// rope_theta and rope scaling, from the keys of transformers 4 (rope_theta,
// rope_scaling) or 5 (rope_parameters). Both may be present; they must agree.
void read_rope(const HfReader& r, ModelConfig& c) {
  if (r.has("rope_scaling")) {
    c.rope_scaling = RopeScaling::from_hf_json(r.at("rope_scaling"), r.source(), "rope_scaling");
  }
  if (!r.has("rope_parameters")) return;
  const json& rp = r.at("rope_parameters");
  const RopeScaling scaling = RopeScaling::from_hf_json(rp, r.source(), "rope_parameters", {"rope_theta"});
  if (r.has("rope_scaling") && scaling != c.rope_scaling) {
    r.fail_key("rope_parameters", "disagrees with key 'rope_scaling' (" + r.at("rope_scaling").dump() + " vs " +
                                      rp.dump() + "): give one of them");
  }
  c.rope_scaling = scaling;
  const HfReader rpr(rp, r.source());
  c.rope_theta = rpr.get_double("rope_theta", c.rope_theta);
}

// Keys that would change the computation in transformers in ways this model
// does not implement: refusing beats silently training a different model.
void reject_unsupported(const HfReader& r) {
  if (r.has("hidden_act") && r.get_string("hidden_act") != "silu") {
    r.fail_key("hidden_act", "only \"silu\" is supported, got " + r.at("hidden_act").dump());
  }
  if (r.get_bool("mlp_bias", false)) r.fail_key("mlp_bias", "MLP biases are not supported");
  if (r.get_double("attention_dropout", 0.0) != 0.0) {
    r.fail_key("attention_dropout", "attention dropout is not supported (must be 0)");
  }
  if (r.get_double("partial_rotary_factor", 1.0) != 1.0) {
    r.fail_key("partial_rotary_factor", "partial rotary embeddings are not supported (must be 1)");
  }
  if (r.has("quantization_config")) r.fail_key("quantization_config", "quantized models are not supported");
}

// What each family's config.json can express: its bias layout and whether
// it has a sliding window.
void validate_family_layout(const ModelConfig& c) {
  if (c.model_type == "qwen2" && (!c.qkv_bias || c.o_bias)) {
    fail("model config: qwen2 has q/k/v biases and no o_proj bias (qkv_bias = true, o_bias = false)");
  }
  if ((c.model_type == "llama" || c.model_type == "qwen3") && c.qkv_bias != c.o_bias) {
    fail("model config: " + c.model_type + "'s attention_bias sets both qkv_bias and o_bias; they must be equal");
  }
  if (c.model_type == "mistral" && (c.qkv_bias || c.o_bias)) fail("model config: mistral has no attention biases");
  if (c.sliding_window < 0) {
    fail("model config: sliding_window must be >= 0 (0: full causal attention), got " +
         std::to_string(c.sliding_window));
  }
  if (c.sliding_window > 0 && c.model_type != "mistral") {
    fail("model config: sliding_window is supported for mistral only, got " + std::to_string(c.sliding_window) +
         " for " + c.model_type);
  }
}

}  // namespace

int64_t ModelConfig::resolved_head_dim() const {
  if (head_dim != 0) return head_dim;
  return num_heads > 0 ? hidden_size / num_heads : 0;
}

void ModelConfig::validate() const {
  if (!is_supported_model_type(model_type)) {
    fail("model config: model_type must be one of " + std::string(kSupportedTypes) + ", got \"" + model_type + "\"");
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
  rope_scaling.validate();
  validate_family_layout(*this);
}

nlohmann::json ModelConfig::to_hf_json(const std::string& torch_dtype) const {
  json j;
  j["architectures"] = json::array({architecture_of(model_type)});
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
  j["rope_scaling"] = rope_scaling.to_hf_json();
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  if (model_type == "llama") {
    j["attention_bias"] = qkv_bias;
    j["mlp_bias"] = false;
  } else if (model_type == "qwen3") {
    j["attention_bias"] = qkv_bias;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
  } else if (model_type == "mistral") {
    j["sliding_window"] = sliding_window > 0 ? json(sliding_window) : json(nullptr);
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
  if (!is_supported_model_type(c.model_type)) {
    r.fail_key("model_type",
               "unsupported model type \"" + c.model_type + "\" (supported: " + std::string(kSupportedTypes) + ")");
  }

  c.vocab_size = r.get_int("vocab_size");
  c.hidden_size = r.get_int("hidden_size");
  c.intermediate_size = r.get_int("intermediate_size");
  c.num_layers = r.get_int("num_hidden_layers");
  c.num_heads = r.get_int("num_attention_heads");
  c.num_kv_heads = r.get_int("num_key_value_heads", c.num_heads);
  // transformers' Qwen3Config defaults head_dim to 128; the others derive it.
  c.head_dim = r.get_int("head_dim", c.model_type == "qwen3" ? 128 : 0);
  c.max_position_embeddings = r.get_int("max_position_embeddings", default_max_positions(c.model_type));
  c.rms_norm_eps = r.get_double("rms_norm_eps", 1e-6);
  c.rope_theta = r.get_double("rope_theta", 10000.0);
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  read_family_keys(r, c);
  read_rope(r, c);
  reject_unsupported(r);

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
         qkv_bias == o.qkv_bias && o_bias == o.o_bias && model_type == o.model_type && rope_scaling == o.rope_scaling &&
         sliding_window == o.sliding_window;
}

}  // namespace ptrain::model
