// Incremental decoding of CausalLm with a key/value cache. Kept apart from
// the training forward (causal_lm.cpp) so that either can change alone; the
// math is the same: RMSNorm, rotary embeddings at each token's own position,
// grouped-query attention, SwiGLU.
#include "core/model/causal_lm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>

namespace ptrain::model {
namespace {

// x: [B, t, H]; cos/sin: [B, t, d]; blocked: [B, 1, 1, t, L] bool, true
// where a query may not read a key; caches: [B, kv_heads, capacity, d].
at::Tensor cached_attention(const Decoder& decoder, const DecoderLayer& layer, const at::Tensor& x, const at::Tensor& cos,
                            const at::Tensor& sin, const at::Tensor& blocked, at::Tensor& key_cache,
                            at::Tensor& value_cache, int64_t start) {
  const ModelConfig& config = decoder.config();
  const int64_t b = x.size(0);
  const int64_t t = x.size(1);
  const int64_t d = config.resolved_head_dim();
  const int64_t heads = config.num_heads;
  const int64_t kv_heads = config.num_kv_heads;
  const int64_t length = start + t;

  auto project = [&](LoraTarget target, int64_t n) {
    return decoder.projection(layer, target, x).view({b, t, n, d});  // [B, t, n, d]
  };
  // As in the training forward (attention_compat.h), the 1/√d scale goes on
  // the queries, folded into the rotary kernel, so both paths round alike.
  const at::Tensor q = decoder.normed_rotary(project(LoraTarget::kQ, heads), layer.q_norm, cos, sin,
                                     1.0 / std::sqrt(static_cast<double>(d)));  // [B, heads, t, d]
  const at::Tensor k = decoder.normed_rotary(project(LoraTarget::kK, kv_heads), layer.k_norm, cos, sin, 1.0);
  const at::Tensor v = project(LoraTarget::kV, kv_heads).transpose(1, 2);  // [B, kv_heads, t, d]
  key_cache.narrow(2, start, t).copy_(k);
  value_cache.narrow(2, start, t).copy_(v);

  // Query head j reads kv head j / (heads / kv_heads). As in the training
  // forward, the query heads of one kv head are stacked into one [group·t, d]
  // matrix, so the cached keys are read in place.
  const int64_t group = heads / kv_heads;
  const at::Tensor grouped_q = q.reshape({b, kv_heads, group * t, d});
  const at::Tensor keys = key_cache.narrow(2, 0, length);      // [B, kv, L, d]
  const at::Tensor values = value_cache.narrow(2, 0, length);  // [B, kv, L, d]
  const at::Tensor scores = at::matmul(grouped_q, keys.transpose(-2, -1)).view({b, kv_heads, group, t, length});
  const at::Tensor probs = at::softmax(scores.masked_fill(blocked, -std::numeric_limits<float>::infinity()), -1);
  const at::Tensor out = at::matmul(probs.view({b, kv_heads, group * t, length}), values)
                             .view({b, heads, t, d})
                             .transpose(1, 2)
                             .reshape({b, t, heads * d});
  return decoder.projection(layer, LoraTarget::kO, out);
}

// Query slot s reads key slot j ≤ s when j holds a real token and, with a
// sliding window W, its position is within the last W of the query's
// (counted in positions, so padding slots between never shorten it); a
// padding query reads only itself, so no row of the softmax is empty.
// positions: [B, t] int64 → [B, t, start + t] bool, true where blocked.
at::Tensor blocked_cache_slots(const CausalLm::KvCache& cache, const at::Tensor& positions, int64_t start, int64_t t,
                               int64_t sliding_window) {
  const int64_t length = start + t;
  const at::TensorOptions slot_options = positions.options();
  const at::Tensor query_slots = at::arange(start, length, slot_options).view({t, 1});
  const at::Tensor key_slots = at::arange(0, length, slot_options).view({1, length});
  at::Tensor allowed = (key_slots <= query_slots).unsqueeze(0) & cache.valid.narrow(1, 0, length).unsqueeze(1);
  if (sliding_window > 0) {
    const at::Tensor distance =
        positions.unsqueeze(2) - cache.positions.narrow(1, 0, length).unsqueeze(1);  // [B, t, L]
    allowed = allowed & (distance < sliding_window);
  }
  return (allowed | (key_slots == query_slots).unsqueeze(0)).logical_not();
}

}  // namespace

CausalLm::KvCache CausalLm::new_kv_cache(int64_t batch, int64_t capacity) const {
  const int64_t d = config().resolved_head_dim();
  const at::TensorOptions options = embed_tokens_.options().requires_grad(false);
  KvCache cache;
  for (size_t i = 0; i < num_layers(); ++i) {
    cache.keys.push_back(at::zeros({batch, config().num_kv_heads, capacity, d}, options));
    cache.values.push_back(at::zeros({batch, config().num_kv_heads, capacity, d}, options));
  }
  cache.valid = at::zeros({batch, capacity}, options.dtype(at::kBool));
  cache.positions = at::zeros({batch, capacity}, options.dtype(at::kLong));
  return cache;
}

void CausalLm::keep_cache_rows(KvCache& cache, const at::Tensor& host_rows) {
  const at::Tensor rows = host_rows.to(cache.valid.device());
  for (at::Tensor& keys : cache.keys) keys = keys.index_select(0, rows);
  for (at::Tensor& values : cache.values) values = values.index_select(0, rows);
  cache.valid = cache.valid.index_select(0, rows);
  cache.positions = cache.positions.index_select(0, rows);
}

at::Tensor CausalLm::decode_step(const at::Tensor& host_ids, const at::Tensor& host_positions,
                                 const at::Tensor& host_valid, KvCache& cache) {
  // The sampler builds each step's ids on the host; they follow the weights.
  const at::Tensor input_ids = on_model_device(host_ids);
  const at::Tensor positions = on_model_device(host_positions);
  const at::Tensor valid = on_model_device(host_valid);
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.scalar_type() == at::kLong, "input_ids must be [B, t] int64, got ",
              input_ids.sizes());
  TORCH_CHECK(positions.sizes() == input_ids.sizes() && valid.sizes() == input_ids.sizes(),
              "positions and valid must have the shape of input_ids ", input_ids.sizes());
  const int64_t b = input_ids.size(0);
  const int64_t t = input_ids.size(1);
  const int64_t start = cache.length;
  const int64_t length = start + t;
  TORCH_CHECK(!cache.keys.empty() && cache.valid.size(0) == b, "the cache holds ", cache.valid.size(0),
              " rows, the step ", b);
  TORCH_CHECK(length <= cache.valid.size(1), "the cache holds ", cache.valid.size(1), " slots, the step needs ",
              length);
  // Read from the host tensor: no device sync for the check.
  const int64_t max_position = host_positions.max().item<int64_t>();
  TORCH_CHECK(host_positions.min().item<int64_t>() >= 0 && max_position < config().max_position_embeddings,
              "positions must be in [0, ", config().max_position_embeddings, "), got up to ", max_position);
  const at::NoGradGuard no_grad;

  decoder_.ensure_rope_cache(max_position + 1, device());
  const int64_t d = config().resolved_head_dim();
  const at::Tensor flat_positions = positions.reshape({-1});
  const at::Tensor cos = decoder_.rope_cos().index_select(0, flat_positions).view({b, t, d});
  const at::Tensor sin = decoder_.rope_sin().index_select(0, flat_positions).view({b, t, d});

  cache.valid.narrow(1, start, t).copy_(valid);
  cache.positions.narrow(1, start, t).copy_(positions);
  const at::Tensor blocked =
      blocked_cache_slots(cache, positions, start, t, config().sliding_window).view({b, 1, 1, t, length});

  at::Tensor x = at::embedding(embed_tokens_, input_ids);  // [B, t, H]
  // A sharded model gathers each layer around its step (layer_parameter_source.h).
  LayerParameterSource* source = layer_source();
  for (size_t i = 0; i < num_layers(); ++i) {
    if (source != nullptr) gather_layer(*source, i, +1, num_layers());
    const DecoderLayer& layer = decoder_.layers()[i];
    x = x + cached_attention(decoder_, layer, decoder_.rms_norm(x, layer.input_norm), cos, sin, blocked, cache.keys[i],
                             cache.values[i], start);
    x = x + decoder_.mlp(layer, decoder_.rms_norm(x, layer.post_norm));
    if (source != nullptr) source->release(i);
  }
  cache.length = length;
  const at::Tensor last = decoder_.rms_norm(x.select(1, t - 1), final_norm_);  // [B, H]
  return decoder_.dense(last, lm_head_weight());                               // [B, V]
}

}  // namespace ptrain::model
