// A Llama / Qwen2 decoder-only causal LM in plain ATen ops, with parameters
// named and laid out as transformers does, so model directories round-trip
// with Hugging Face tools.
//
//   x = embed_tokens[input_ids]
//   per layer:  x += o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))  with n = rms_norm(x)
//               x += down_proj(silu(gate_proj(n)) * up_proj(n))                       with n = rms_norm(x)
//   logits = lm_head(rms_norm(x))          (lm_head = embed_tokens when tied)
//
// rms_norm(x) = x * rsqrt(mean(x²) + eps) * w (Zhang & Sennrich 2019); rotary
// embeddings (Su et al. 2021) in the rotate-half convention; grouped-query
// attention (Ainslie et al. 2023) repeats each kv head num_heads/num_kv_heads
// times; SwiGLU MLP (Shazeer 2020). Positions are 0..T-1 in every row, and
// attention is only causal: inputs must be right-padded, so real tokens never
// attend to padding.
#pragma once

#include "core/model/model_config.h"

#include "ptrain/sdk/model.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::model {

class CausalLm : public sdk::LanguageModel {
 public:
  // Weights of linear layers and embeddings ~ N(0, 0.02²) (transformers'
  // initializer_range), biases 0, norm weights 1. Deterministic in `seed`:
  // draws from a private CPU generator in named_parameters() order.
  static std::unique_ptr<CausalLm> init_random(const ModelConfig& config, uint64_t seed);

  // Reads config.json and model.safetensors (or the shards listed in
  // model.safetensors.index.json). Every expected tensor must be present with
  // its exact shape and a floating dtype (converted to float32); unexpected
  // tensors are errors, except rotary `inv_freq` buffers (recomputed) and, in
  // a tied model, an lm_head.weight equal to embed_tokens. Throws
  // sdk::ModelError naming the directory and the tensor.
  static std::unique_ptr<CausalLm> load_hf_dir(const std::filesystem::path& dir);

  // Writes config.json and model.safetensors (float32, contiguous) into `dir`,
  // creating it if needed. Writing to a temporary directory and renaming is
  // the caller's concern.
  void save_hf_dir(const std::filesystem::path& dir) const;

  // Trainable leaves with transformers' names, in transformers' module order.
  // A tied lm_head is not listed (it is model.embed_tokens.weight).
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const override;

  const ModelConfig& config() const { return config_; }

  // Detached clones with requires_grad = false (reference / old policy).
  std::unique_ptr<CausalLm> frozen_copy() const;

  // input_ids: [B, T] int64, right-padded, values in [0, vocab_size)
  // → [B, T, hidden_size] float32, after the final norm.
  at::Tensor hidden_states(const at::Tensor& input_ids);

  // sdk::LanguageModel. target_log_probs projects only the loss_mask rows
  // through lm_head and computes log p = logit[target] - logsumexp(logits).
  sdk::TargetLogProbs target_log_probs(const sdk::TokenBatch& batch) override;
  at::Tensor logits(const at::Tensor& input_ids) override;  // [B, T] int64 → [B, T, V] float32
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t num_parameters() const override;
  void soft_update_from(const sdk::LanguageModel& source, double alpha) override;

 private:
  struct Layer {
    at::Tensor input_norm;   // [H]
    at::Tensor q_weight;     // [num_heads * head_dim, H]
    at::Tensor q_bias;       // [num_heads * head_dim] or undefined
    at::Tensor k_weight;     // [num_kv_heads * head_dim, H]
    at::Tensor k_bias;       // [num_kv_heads * head_dim] or undefined
    at::Tensor v_weight;     // [num_kv_heads * head_dim, H]
    at::Tensor v_bias;       // [num_kv_heads * head_dim] or undefined
    at::Tensor o_weight;     // [H, num_heads * head_dim]
    at::Tensor o_bias;       // [H] or undefined
    at::Tensor post_norm;    // [H]
    at::Tensor gate_weight;  // [I, H]
    at::Tensor up_weight;    // [I, H]
    at::Tensor down_weight;  // [H, I]
  };

  // Takes tensors in expected_parameters() order; binds the typed handles.
  CausalLm(ModelConfig config, std::vector<std::pair<std::string, at::Tensor>> params);

  // Names and shapes of all parameters for a config, in named_parameters() order.
  static std::vector<std::pair<std::string, std::vector<int64_t>>> expected_parameters(const ModelConfig& config);

  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  at::Tensor attention(const Layer& layer, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                       const at::Tensor& causal_mask) const;
  at::Tensor mlp(const Layer& layer, const at::Tensor& x) const;
  const at::Tensor& lm_head_weight() const { return config_.tie_word_embeddings ? embed_tokens_ : lm_head_; }
  void ensure_rope_cache(int64_t length);

  ModelConfig config_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
  at::Tensor embed_tokens_;  // [V, H]
  std::vector<Layer> layers_;
  at::Tensor final_norm_;  // [H]
  at::Tensor lm_head_;     // [V, H]; undefined when tied

  // cos/sin of position × inv_freq for positions 0..rope_length_-1, recomputed
  // only when a longer sequence arrives. [L, head_dim] float32 each.
  at::Tensor rope_cos_;
  at::Tensor rope_sin_;
  int64_t rope_length_ = 0;
};

}  // namespace ptrain::model
