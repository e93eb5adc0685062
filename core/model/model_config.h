// Architecture hyper-parameters of a Llama / Qwen2 / Qwen3 / Mistral causal
// LM, and their mapping to and from a Hugging Face config.json.
#pragma once

#include "core/model/rope_scaling.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace ptrain::model {

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // 0: hidden_size / num_heads
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;             // q/k/v projections have bias (Qwen2; Llama with attention_bias)
  bool o_bias = false;               // o_proj has bias (Llama with attention_bias = true only)
  std::string model_type = "llama";  // "llama", "qwen2", "qwen3" or "mistral"
  RopeScaling rope_scaling;
  // Mistral: a position attends to the last sliding_window positions of its
  // own sequence (itself included); 0: full causal attention.
  int64_t sliding_window = 0;

  int64_t resolved_head_dim() const;
  // Qwen3 normalises each head's queries and keys (RMSNorm over head_dim,
  // weights self_attn.q_norm / k_norm) before the rotary embedding.
  bool has_qk_norm() const { return model_type == "qwen3"; }

  // Throws sdk::ModelError naming the first inconsistent field.
  void validate() const;

  // config.json as transformers writes it, for weights stored in
  // `torch_dtype` ("float32", "bfloat16", "float16").
  nlohmann::json to_hf_json(const std::string& torch_dtype = "float32") const;

  // Reads a transformers config.json. `source` (the file path) prefixes every
  // error. Size keys (vocab_size, hidden_size, intermediate_size,
  // num_hidden_layers, num_attention_heads) are required; the other keys take
  // transformers' defaults when missing, except mistral's sliding_window
  // (null or a length), which is required. Features this model does not
  // implement (rope_scaling types other than linear and llama3, Qwen's
  // use_sliding_window, mlp_bias, non-SiLU activations, attention dropout)
  // are rejected with a ModelError naming the key and what is supported.
  static ModelConfig from_hf_json(const nlohmann::json& j, const std::string& source);

  bool operator==(const ModelConfig& other) const;
  bool operator!=(const ModelConfig& other) const { return !(*this == other); }
};

}  // namespace ptrain::model
