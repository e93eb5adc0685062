// An independent reference of transformers' decoder forward for the families
// ptrain supports, written from the Hugging Face definitions in plain ATen ops
// at double precision (autograd gives its parameter gradients):
//
//   modeling_llama.py    LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb,
//                        rotate_half, repeat_kv, eager_attention_forward, LlamaMLP
//   modeling_rope_utils  _compute_default_rope_parameters, linear scaling
//                        (positions / factor), _compute_llama3_parameters
//   modeling_qwen3.py    q_norm / k_norm: Qwen3RMSNorm over head_dim, applied to
//                        the [B, T, n, d] projections before the rotary embedding
//   modeling_mistral.py  sliding window: a query reads key j when
//                        q - W < j ≤ q (masking_utils.sliding_window_overlay)
//
// It reads the model's parameters by their transformers names and shares no
// code with core/model: a different formulation (double precision, explicit
// masks, repeat_kv by copy, positions divided by factor for linear scaling,
// the llama3 bands written per frequency) of the same definitions.
#pragma once

#include "core/model/model_config.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::testing::hf_reference {

using Params = std::map<std::string, at::Tensor>;
using model::ModelConfig;
using model::RopeScalingType;

// Double-precision leaves (requires_grad) with the model's values.
inline Params copy_params(const std::vector<std::pair<std::string, at::Tensor>>& named) {
  Params p;
  for (const auto& [name, t] : named) p[name] = t.detach().to(at::kCPU, at::kDouble).clone().requires_grad_(true);
  return p;
}

// inv_freq_i = 1 / theta^(2i/d); llama3 rescales it band by band.
inline at::Tensor inv_freq(const ModelConfig& c) {
  const int64_t d = c.resolved_head_dim();
  const auto& s = c.rope_scaling;
  std::vector<double> out;
  for (int64_t i = 0; i < d / 2; ++i) {
    const double f = 1.0 / std::pow(c.rope_theta, 2.0 * static_cast<double>(i) / static_cast<double>(d));
    if (s.type != RopeScalingType::kLlama3) {
      out.push_back(f);
      continue;
    }
    const double old_context = static_cast<double>(s.original_max_position_embeddings);
    const double wavelen = 2 * M_PI / f;
    if (wavelen < old_context / s.high_freq_factor) {
      out.push_back(f);  // high frequencies: kept
    } else if (wavelen > old_context / s.low_freq_factor) {
      out.push_back(f / s.factor);  // low frequencies: stretched
    } else {
      const double smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back((1 - smooth) * f / s.factor + smooth * f);
    }
  }
  return at::tensor(out, at::kDouble);
}

// x: [B, n, T, d]; positions: [B, T] int64.
inline at::Tensor apply_rope(const at::Tensor& x, const ModelConfig& c, const at::Tensor& positions) {
  at::Tensor pos = positions.to(at::kDouble);
  if (c.rope_scaling.type == RopeScalingType::kLinear) pos = pos / c.rope_scaling.factor;
  const at::Tensor freqs = pos.unsqueeze(-1) * inv_freq(c);         // [B, T, d/2]
  const at::Tensor emb = at::cat({freqs, freqs}, -1).unsqueeze(1);  // [B, 1, T, d]
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * emb.cos() + rotated * emb.sin();
}

inline at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return w * (x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps));
}

inline at::Tensor linear(const Params& p, const std::string& name, const at::Tensor& x) {
  at::Tensor y = at::matmul(x, p.at(name + ".weight").t());
  const auto bias = p.find(name + ".bias");
  return bias == p.end() ? y : y + bias->second;
}

// [B, T, T] bool: query i reads key j when j ≤ i in the same document and,
// with a sliding window, position_i - W < position_j.
inline at::Tensor allowed_keys(const ModelConfig& c, const at::Tensor& positions, const at::Tensor& documents) {
  const int64_t t = positions.size(1);
  at::Tensor allowed =
      at::ones({t, t}, at::kBool).tril().unsqueeze(0) & (documents.unsqueeze(2) == documents.unsqueeze(1));
  if (c.sliding_window > 0) {
    allowed = allowed & ((positions.unsqueeze(2) - positions.unsqueeze(1)) < c.sliding_window);
  }
  return allowed;
}

// x: [B, T, H] → [B, T, H].
inline at::Tensor attention(const Params& p, const ModelConfig& c, const std::string& pre, const at::Tensor& x,
                            const at::Tensor& positions, const at::Tensor& allowed) {
  const int64_t b = x.size(0), t = x.size(1), d = c.resolved_head_dim();
  auto heads = [&](const std::string& proj, int64_t n, const char* norm) {
    at::Tensor h = linear(p, pre + "self_attn." + proj, x).view({b, t, n, d});
    if (norm != nullptr && c.has_qk_norm())
      h = rms_norm(h, p.at(pre + "self_attn." + norm + ".weight"), c.rms_norm_eps);
    return h.transpose(1, 2);  // [B, n, T, d]
  };
  const at::Tensor q = apply_rope(heads("q_proj", c.num_heads, "q_norm"), c, positions);
  at::Tensor k = apply_rope(heads("k_proj", c.num_kv_heads, "k_norm"), c, positions);
  at::Tensor v = heads("v_proj", c.num_kv_heads, nullptr);
  const int64_t group = c.num_heads / c.num_kv_heads;  // repeat_kv
  k = k.repeat_interleave(group, 1);
  v = v.repeat_interleave(group, 1);
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  const at::Tensor probs =
      at::softmax(scores.masked_fill(allowed.unsqueeze(1).logical_not(), -std::numeric_limits<double>::infinity()), -1);
  const at::Tensor out = at::matmul(probs, v).transpose(1, 2).reshape({b, t, c.num_heads * d});
  return linear(p, pre + "self_attn.o_proj", out);
}

// ids, positions, documents: [B, T] int64 → logits [B, T, V] double.
inline at::Tensor logits(const Params& p, const ModelConfig& c, const at::Tensor& ids, const at::Tensor& positions,
                         const at::Tensor& documents) {
  const at::Tensor allowed = allowed_keys(c, positions, documents);
  at::Tensor x =
      p.at("model.embed_tokens.weight").index_select(0, ids.reshape({-1})).view({ids.size(0), ids.size(1), -1});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    x = x + attention(p, c, pre, rms_norm(x, p.at(pre + "input_layernorm.weight"), c.rms_norm_eps), positions, allowed);
    const at::Tensor h = rms_norm(x, p.at(pre + "post_attention_layernorm.weight"), c.rms_norm_eps);
    x = x + linear(p, pre + "mlp.down_proj",
                   at::silu(linear(p, pre + "mlp.gate_proj", h)) * linear(p, pre + "mlp.up_proj", h));
  }
  const at::Tensor head = c.tie_word_embeddings ? p.at("model.embed_tokens.weight") : p.at("lm_head.weight");
  return at::matmul(rms_norm(x, p.at("model.norm.weight"), c.rms_norm_eps), head.t());
}

}  // namespace ptrain::testing::hf_reference
