// The decoder's forward math (the formulas are in causal_lm.h): the layers'
// weights, RMSNorm, rotary embeddings, attention, the SwiGLU MLP and one
// decoder layer, plus the rotary tables and the attention layout every layer
// of a forward shares. CausalLm owns one and adds the embedding, the final
// norm, the head and the modes (layer_execution.h) around it.
#pragma once

#include "core/model/lora.h"
#include "core/model/model_config.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ptrain::model {

// One decoder layer's tensors: handles to the model's parameters.
struct DecoderLayer {
  at::Tensor input_norm;   // [H]
  at::Tensor q_weight;     // [num_heads * head_dim, H]
  at::Tensor q_bias;       // [num_heads * head_dim] or undefined
  at::Tensor k_weight;     // [num_kv_heads * head_dim, H]
  at::Tensor k_bias;       // [num_kv_heads * head_dim] or undefined
  at::Tensor v_weight;     // [num_kv_heads * head_dim, H]
  at::Tensor v_bias;       // [num_kv_heads * head_dim] or undefined
  at::Tensor o_weight;     // [H, num_heads * head_dim]
  at::Tensor o_bias;       // [H] or undefined
  at::Tensor q_norm;       // [head_dim] (Qwen3) or undefined
  at::Tensor k_norm;       // [head_dim] (Qwen3) or undefined
  at::Tensor post_norm;    // [H]
  at::Tensor gate_weight;  // [I, H]
  at::Tensor up_weight;    // [I, H]
  at::Tensor down_weight;  // [H, I]

  // The LoRA adapters by LoraTarget (undefined where not wrapped), and
  // the layer's position in the decoder (which picks its dropout masks).
  std::array<LoraPair, kLoraTargetCount> lora;
  size_t index = 0;

  const at::Tensor& weight(LoraTarget target) const;
  const at::Tensor& bias(LoraTarget target) const;  // undefined where the projection has none
  // Every base tensor (defined or not), in Decoder::layer_parameters()' order.
  std::vector<const at::Tensor*> base_tensors() const;
};

// What every layer of one forward shares: rotary tables ([T, d], or
// [B, T, d] with position_ids) and which keys each query may read
// (attention_compat::attend: `allowed` [B, 1, T, T] for packed rows,
// [1, 1, T, T] for a sliding window shorter than T, undefined for plain
// causal; `blocked` for the unfused kernel; `sequence_starts` instead of
// `allowed` for packed rows on CUDA, attention_varlen.h).
struct AttentionLayout {
  at::Tensor cos;
  at::Tensor sin;
  at::Tensor allowed;
  at::Tensor blocked;
  at::Tensor sequence_starts;
  LoraDropout lora_dropout;  // the adapters' input dropout of this forward
};

class Decoder {
 public:
  explicit Decoder(ModelConfig config) : config_(std::move(config)) {}

  const ModelConfig& config() const { return config_; }
  std::vector<DecoderLayer>& layers() { return layers_; }
  const std::vector<DecoderLayer>& layers() const { return layers_; }
  size_t num_layers() const { return layers_.size(); }

  // The dtype the matrix products read their operands in (model::linear).
  at::ScalarType compute_dtype() const { return compute_dtype_; }
  void set_compute_dtype(at::ScalarType dtype) { compute_dtype_ = dtype; }
  // LoRA's alpha / r (LoraSpec::scale) for the layers' adapters.
  void set_lora_scale(double scale) { lora_scale_ = scale; }

  // Decoder layer `index`'s tensors that take gradients (trainable base
  // tensors, or the trainable adapters), in a fixed order.
  std::vector<at::Tensor> layer_parameters(size_t index) const;
  // Every base tensor of decoder layer `index`, in layer_parameters()' order.
  std::vector<at::Tensor> layer_tensors(size_t index) const;

  // The rotary tables for positions 0..length-1 at least, on `device`:
  // [L, head_dim] float32 each, recomputed only when a longer sequence arrives.
  void ensure_rope_cache(int64_t length, at::Device device);
  const at::Tensor& rope_cos() const { return rope_cos_; }
  const at::Tensor& rope_sin() const { return rope_sin_; }
  // The tables are rebuilt on the next use (the weights moved device).
  void clear_rope_cache() { rope_length_ = 0; }

  // The layout of a forward over rows of length t on `device`; position_ids
  // and document_ids ([B, T] int64) describe packed rows, or are undefined.
  AttentionLayout attention_layout(int64_t t, const at::Tensor& position_ids, const at::Tensor& document_ids,
                                   at::Device device);

  // model::linear at the compute dtype.
  at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {}) const;
  // One of a layer's seven projections: dense, plus its LoRA update when wrapped.
  at::Tensor projection(const DecoderLayer& layer, LoraTarget target, const at::Tensor& x,
                        const LoraDropout& dropout = {}) const;
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  // A projection's output viewed per head, [B, T, n, d]: RMSNorm over d with
  // `norm` (Qwen3's q_norm / k_norm), then rotary embeddings times `scale`
  // → [B, n, T, d]. Without `norm`, the rotary embedding alone.
  at::Tensor normed_rotary(const at::Tensor& heads, const at::Tensor& norm, const at::Tensor& cos,
                           const at::Tensor& sin, double scale) const;
  at::Tensor attention(const DecoderLayer& layer, const at::Tensor& x, const AttentionLayout& layout) const;
  at::Tensor mlp(const DecoderLayer& layer, const at::Tensor& x, const LoraDropout& dropout = {}) const;
  // Decoder layer `index`: x + attention, then + MLP. [B, T, H] → [B, T, H].
  at::Tensor layer_forward(size_t index, const at::Tensor& x, const AttentionLayout& layout) const;

 private:
  // mlp as one function (swiglu_mlp.h): bf16-mixed on the accelerator route, no MLP adapters.
  bool takes_fused_mlp(const DecoderLayer& layer, const at::Tensor& x) const;

  ModelConfig config_;
  std::vector<DecoderLayer> layers_;
  at::ScalarType compute_dtype_ = at::kFloat;
  double lora_scale_ = 0.0;

  // cos/sin of position × inv_freq (rope_inv_freq: with config.json's
  // rope scaling) for positions 0..rope_length_-1.
  at::Tensor rope_cos_;
  at::Tensor rope_sin_;
  int64_t rope_length_ = 0;
};

}  // namespace ptrain::model
