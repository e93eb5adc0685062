#include "core/model/decoder.h"

#include "core/model/attention_compat.h"
#include "core/model/attention_varlen.h"
#include "core/model/fused_kernels.h"
#include "core/model/gemm.h"
#include "core/model/kernel_route.h"
#include "core/model/rope_scaling.h"
#include "core/model/swiglu_mlp.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace ptrain::model {

const at::Tensor& DecoderLayer::weight(LoraTarget target) const {
  switch (target) {
    case LoraTarget::kQ:
      return q_weight;
    case LoraTarget::kK:
      return k_weight;
    case LoraTarget::kV:
      return v_weight;
    case LoraTarget::kO:
      return o_weight;
    case LoraTarget::kGate:
      return gate_weight;
    case LoraTarget::kUp:
      return up_weight;
    case LoraTarget::kDown:
      break;
  }
  return down_weight;
}

const at::Tensor& DecoderLayer::bias(LoraTarget target) const {
  static const at::Tensor none;
  switch (target) {
    case LoraTarget::kQ:
      return q_bias;
    case LoraTarget::kK:
      return k_bias;
    case LoraTarget::kV:
      return v_bias;
    case LoraTarget::kO:
      return o_bias;
    default:
      return none;
  }
}

std::vector<const at::Tensor*> DecoderLayer::base_tensors() const {
  return {&input_norm, &q_weight, &q_bias, &k_weight,  &k_bias,      &v_weight,  &v_bias,     &o_weight,
          &o_bias,     &q_norm,   &k_norm, &post_norm, &gate_weight, &up_weight, &down_weight};
}

std::vector<at::Tensor> Decoder::layer_tensors(size_t index) const {
  std::vector<at::Tensor> tensors;
  for (const at::Tensor* t : layers_.at(index).base_tensors()) {
    if (t->defined()) tensors.push_back(*t);
  }
  return tensors;
}

std::vector<at::Tensor> Decoder::layer_parameters(size_t index) const {
  const DecoderLayer& layer = layers_.at(index);
  std::vector<at::Tensor> parameters;
  for (const at::Tensor* t : layer.base_tensors()) {
    if (t->defined() && t->requires_grad()) parameters.push_back(*t);
  }
  for (const LoraPair& pair : layer.lora) {
    if (pair.defined() && pair.a.requires_grad()) parameters.insert(parameters.end(), {pair.a, pair.b});
  }
  return parameters;
}

void Decoder::ensure_rope_cache(int64_t length, at::Device device) {
  if (length <= rope_length_) return;
  // Grow geometrically so that slowly growing lengths do not recompute each call.
  length = std::max(length, std::min(2 * rope_length_, config_.max_position_embeddings));
  // Float32 as transformers computes it, rope scaling included.
  const at::Tensor inv_freq = rope_inv_freq(config_.rope_theta, config_.resolved_head_dim(), config_.rope_scaling);
  const at::Tensor positions = at::arange(length, at::kFloat);  // [L]
  const at::Tensor freqs = at::outer(positions, inv_freq);      // [L, d/2]
  const at::Tensor angles = at::cat({freqs, freqs}, -1);        // [L, d]
  // Computed on the host, as transformers' float32 tables, then moved once.
  rope_cos_ = angles.cos().to(device);
  rope_sin_ = angles.sin().to(device);
  rope_length_ = length;
}

at::Tensor Decoder::dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const {
  return model::linear(x, weight, bias, compute_dtype_);
}

at::Tensor Decoder::projection(const DecoderLayer& layer, LoraTarget target, const at::Tensor& x,
                               const LoraDropout& dropout) const {
  const at::Tensor base = dense(x, layer.weight(target), layer.bias(target));
  const LoraPair& adapter = layer.lora[static_cast<size_t>(target)];
  if (!adapter.defined()) return base;
  const uint64_t stream = layer.index * kLoraTargetCount + static_cast<size_t>(target);
  return base + lora_update(x, adapter, lora_scale_, dropout, stream, compute_dtype_);
}

at::Tensor Decoder::rms_norm(const at::Tensor& x, const at::Tensor& weight) const {
  return fused::rms_norm(x, weight, config_.rms_norm_eps);
}

at::Tensor Decoder::normed_rotary(const at::Tensor& heads, const at::Tensor& norm, const at::Tensor& cos,
                                  const at::Tensor& sin, double scale) const {
  return fused::rotary(norm.defined() ? rms_norm(heads, norm) : heads, cos, sin, scale);
}

// x: [B, T, H] → [B, T, H].
at::Tensor Decoder::attention(const DecoderLayer& layer, const at::Tensor& x, const AttentionLayout& layout) const {
  const int64_t b = x.size(0);
  const int64_t t = x.size(1);
  const int64_t d = config_.resolved_head_dim();
  const int64_t heads = config_.num_heads;
  const int64_t kv_heads = config_.num_kv_heads;

  auto project = [&](LoraTarget target, int64_t n) {
    return projection(layer, target, x, layout.lora_dropout).view({b, t, n, d});  // [B, T, n, d]
  };
  // Rotary embeddings write the [B, n, T, d] layout attention reads.
  const at::Tensor q = normed_rotary(project(LoraTarget::kQ, heads), layer.q_norm, layout.cos, layout.sin,
                                     attention_compat::query_scale(d));
  const at::Tensor k = normed_rotary(project(LoraTarget::kK, kv_heads), layer.k_norm, layout.cos, layout.sin, 1.0);
  const at::Tensor v = project(LoraTarget::kV, kv_heads).transpose(1, 2);  // [B, kv_heads, T, d]
  const at::Tensor out = attention_compat::attend(q, k, v, layout.allowed, layout.blocked, compute_dtype_,
                                                  layout.sequence_starts);  // [B, heads, T, d]
  return projection(layer, LoraTarget::kO, out.transpose(1, 2).reshape({b, t, heads * d}), layout.lora_dropout);
}

at::Tensor Decoder::mlp(const DecoderLayer& layer, const at::Tensor& x, const LoraDropout& dropout) const {
  if (takes_fused_mlp(layer, x)) return swiglu_mlp_bf16(x, layer.gate_weight, layer.up_weight, layer.down_weight);
  const at::Tensor gate = projection(layer, LoraTarget::kGate, x, dropout);
  const at::Tensor up = projection(layer, LoraTarget::kUp, x, dropout);
  return projection(layer, LoraTarget::kDown, at::silu(gate) * up, dropout);
}

// The accelerator route under bf16-mixed, without adapters on the MLP: the
// fused function, the same values in fewer passes (swiglu_mlp.h). The CPU
// route keeps the composition, whose elementwise ops its CPU kernels run.
bool Decoder::takes_fused_mlp(const DecoderLayer& layer, const at::Tensor& x) const {
  const auto adapted = [&](LoraTarget target) { return layer.lora[static_cast<size_t>(target)].defined(); };
  return compute_dtype_ == at::kBFloat16 && !takes_cpu_kernels(x) && x.numel() > 0 && !adapted(LoraTarget::kGate) &&
         !adapted(LoraTarget::kUp) && !adapted(LoraTarget::kDown);
}

at::Tensor Decoder::layer_forward(size_t index, const at::Tensor& x, const AttentionLayout& layout) const {
  const DecoderLayer& layer = layers_.at(index);
  const at::Tensor h = x + attention(layer, rms_norm(x, layer.input_norm), layout);
  return h + mlp(layer, rms_norm(h, layer.post_norm), layout.lora_dropout);
}

AttentionLayout Decoder::attention_layout(int64_t t, const at::Tensor& position_ids, const at::Tensor& document_ids,
                                          at::Device device) {
  ensure_rope_cache(t, device);
  AttentionLayout layout;
  if (position_ids.defined()) {
    // Each token's own position (packed rows restart per document): [B, T, d].
    const int64_t b = position_ids.size(0);
    const at::Tensor flat = position_ids.reshape({-1});
    layout.cos = rope_cos_.index_select(0, flat).view({b, t, -1});
    layout.sin = rope_sin_.index_select(0, flat).view({b, t, -1});
  } else {
    layout.cos = rope_cos_.narrow(0, 0, t);  // [T, d], the same for every row
    layout.sin = rope_sin_.narrow(0, 0, t);
  }
  // The fused kernel takes plain causality as a flag: the [T, T] mask is built
  // only for packed rows, a window shorter than the row, or the unfused path.
  // Packed rows on CUDA take the variable-length flash kernel instead, which
  // reads where each document starts.
  const int64_t window = config_.sliding_window;
  const bool windowed = window > 0 && t > window;
  if (document_ids.defined() && !windowed &&
      packed_flash_attention_applies(device, compute_dtype_, config_.resolved_head_dim())) {
    layout.sequence_starts = packed_sequence_starts(document_ids);
    return layout;
  }
  const bool needs_mask = document_ids.defined() || windowed || !attention_compat::kFusedAttention;
  at::Tensor causal;  // [T, T] bool: query i may read key j
  if (needs_mask) {
    const at::Tensor slots = at::arange(t, at::TensorOptions().dtype(at::kLong).device(device));
    const at::Tensor distance = slots.unsqueeze(1) - slots.unsqueeze(0);  // i - j
    // Mistral: key j is within the window when i - W < j ≤ i. Positions
    // advance with slots inside a document, so the window counts within it.
    causal = windowed ? (distance >= 0).logical_and(distance < window) : distance >= 0;
  }
  if (document_ids.defined()) {
    // Block-diagonal causal: a query reads earlier keys of its own document.
    const at::Tensor same_document = document_ids.unsqueeze(2) == document_ids.unsqueeze(1);  // [B, T, T]
    layout.allowed = same_document.logical_and(causal).unsqueeze(1);                          // [B, 1, T, T]
  } else if (windowed) {
    layout.allowed = causal.view({1, 1, t, t});
  }
  if (!attention_compat::kFusedAttention) {
    layout.blocked = layout.allowed.defined() ? layout.allowed.logical_not() : causal.logical_not();
  }
  return layout;
}

}  // namespace ptrain::model
