#include "core/model/causal_lm.h"

#include "core/model/attention_compat.h"
#include "core/model/attention_varlen.h"
#include "core/model/fused_kernels.h"
#include "core/model/gemm.h"
#include "core/model/hf_model_dir.h"
#include "core/model/shape_text.h"
#include "core/model/target_scores.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <set>
#include <utility>

namespace ptrain::model {
namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// [min, max] of a non-empty int64 tensor on the host, read from its memory:
// one pass, and no tensor-to-scalar read inside the training loop.
std::pair<int64_t, int64_t> host_value_range(const at::Tensor& ids) {
  const at::Tensor contiguous = ids.contiguous();
  const int64_t* data = contiguous.data_ptr<int64_t>();
  const auto [min_it, max_it] = std::minmax_element(data, data + contiguous.numel());
  return {*min_it, *max_it};
}

// The same over the positions where `mask` (bool, of ids' shape) is set;
// nullopt when there are none.
std::optional<std::pair<int64_t, int64_t>> host_masked_value_range(const at::Tensor& ids, const at::Tensor& mask) {
  const at::Tensor ids_contiguous = ids.contiguous(), mask_contiguous = mask.contiguous();
  const int64_t* id = ids_contiguous.data_ptr<int64_t>();
  const bool* selected = mask_contiguous.data_ptr<bool>();
  std::optional<std::pair<int64_t, int64_t>> range;
  for (int64_t i = 0; i < ids_contiguous.numel(); ++i) {
    if (!selected[i]) continue;
    range = range ? std::make_pair(std::min(range->first, id[i]), std::max(range->second, id[i]))
                  : std::make_pair(id[i], id[i]);
  }
  return range;
}

}  // namespace

CausalLm::CausalLm(ModelConfig config, NamedTensors params) : config_(std::move(config)), params_(std::move(params)) {
  bind_handles();
}

void CausalLm::bind_handles() {
  const bool qkv_bias = config_.qkv_bias;
  const bool o_bias = config_.o_bias;
  size_t next = 0;
  auto take = [&](const char* suffix) -> at::Tensor {
    TORCH_INTERNAL_ASSERT(next < params_.size() && ends_with(params_[next].first, suffix), "parameter order: expected ",
                          suffix, " at ", next);
    return params_[next++].second;
  };
  embed_tokens_ = take("model.embed_tokens.weight");
  layers_.assign(config_.num_layers, Layer{});
  for (Layer& layer : layers_) {
    layer.index = static_cast<size_t>(&layer - layers_.data());
    layer.q_weight = take("q_proj.weight");
    if (qkv_bias) layer.q_bias = take("q_proj.bias");
    layer.k_weight = take("k_proj.weight");
    if (qkv_bias) layer.k_bias = take("k_proj.bias");
    layer.v_weight = take("v_proj.weight");
    if (qkv_bias) layer.v_bias = take("v_proj.bias");
    layer.o_weight = take("o_proj.weight");
    if (o_bias) layer.o_bias = take("o_proj.bias");
    if (config_.has_qk_norm()) {
      layer.q_norm = take("self_attn.q_norm.weight");
      layer.k_norm = take("self_attn.k_norm.weight");
    }
    layer.gate_weight = take("gate_proj.weight");
    layer.up_weight = take("up_proj.weight");
    layer.down_weight = take("down_proj.weight");
    layer.input_norm = take("input_layernorm.weight");
    layer.post_norm = take("post_attention_layernorm.weight");
  }
  final_norm_ = take("model.norm.weight");
  if (!config_.tie_word_embeddings) lm_head_ = take("lm_head.weight");
  TORCH_INTERNAL_ASSERT(next == params_.size(), "parameter order: ", params_.size() - next, " unused tensors");
  bind_lora_handles();
}

std::unique_ptr<CausalLm> CausalLm::init_random(const ModelConfig& config, uint64_t seed) {
  config.validate();
  at::Generator generator = at::detail::createCPUGenerator(seed);
  NamedTensors params;
  for (const auto& [name, shape] : expected_parameters(config)) {
    at::Tensor t;
    if (ends_with(name, "norm.weight")) {
      t = at::ones(shape, at::kFloat);
    } else if (ends_with(name, ".bias")) {
      t = at::zeros(shape, at::kFloat);
    } else {
      t = at::empty(shape, at::kFloat).normal_(0.0, 0.02, generator);
    }
    params.emplace_back(name, t.requires_grad_(true));
  }
  return std::unique_ptr<CausalLm>(new CausalLm(config, std::move(params)));
}

void CausalLm::set_compute_dtype(at::ScalarType dtype) {
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16, "compute dtype must be float32 or bfloat16, got ", dtype);
  compute_dtype_ = dtype;
}

void CausalLm::to_device(at::Device device) {
  if (device == this->device()) return;
  for (auto& [name, t] : params_) t = t.detach().to(device).requires_grad_(t.requires_grad());
  for (auto& [name, t] : lora_params_) t = t.detach().to(device).requires_grad_(t.requires_grad());
  bind_handles();
  rope_length_ = 0;  // the rotary tables are rebuilt on the new device
}

at::Tensor CausalLm::dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const {
  return model::linear(x, weight, bias, compute_dtype_);
}

NamedTensors CausalLm::named_parameters() const { return lora_ ? lora_params_ : params_; }

std::unique_ptr<CausalLm> CausalLm::frozen_copy() const {
  // A LoRA model's base weights never change: the copy shares them. A model
  // sharded by layer (sharding "full") is whole while it is copied.
  NamedTensors copies;
  copies.reserve(params_.size());
  for (size_t i = 0; layer_source_ != nullptr && i < layers_.size(); ++i) layer_source_->gather(i);
  for (const auto& [name, t] : params_) copies.emplace_back(name, lora_ ? t.detach() : t.detach().clone());
  for (size_t i = 0; layer_source_ != nullptr && i < layers_.size(); ++i) layer_source_->release(i);
  auto copy = std::unique_ptr<CausalLm>(new CausalLm(config_, std::move(copies)));
  copy->stored_dtype_ = stored_dtype_;
  copy->compute_dtype_ = compute_dtype_;
  copy->source_dir_ = source_dir_;
  if (lora_) {
    copy->lora_ = lora_;
    for (const auto& [name, t] : lora_params_) copy->lora_params_.emplace_back(name, t.detach().clone());
    copy->bind_lora_handles();
  }
  return copy;
}

void CausalLm::soft_update_from(const sdk::LanguageModel& source, double alpha) {
  const auto* other = dynamic_cast<const CausalLm*>(&source);
  if (other == nullptr || other->config_ != config_) {
    throw sdk::ModelError("soft_update_from: the source model has a different architecture");
  }
  // Mixing W + B·A products is no mix of the factors, and a LoRA model's
  // reference shares its base weights: neither can be blended in place.
  if (lora_ || other->lora_) {
    throw sdk::ModelError(
        "soft_update_from: not supported with LoRA adapters ([lora] rank > 0), e.g. for a TR-DPO "
        "reference sync; train without [lora] or turn the sync off");
  }
  at::NoGradGuard no_grad;
  if (layer_source_ == nullptr && other->layer_source_ == nullptr) {
    for (size_t i = 0; i < params_.size(); ++i) {
      params_[i].second.mul_(1.0 - alpha).add_(other->params_[i].second.detach(), alpha);
    }
    return;
  }
  // Sharded by layer (sharding "full"): both are, alike; the layers blend
  // chunk by chunk, the tensors outside them whole.
  if (layer_source_ == nullptr || other->layer_source_ == nullptr) {
    throw sdk::ModelError("soft_update_from: one model is sharded by layer and the other is not");
  }
  layer_source_->blend_from(*other->layer_source_, alpha);
  std::set<const void*> in_layers;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const at::Tensor& tensor : layer_tensors(i)) in_layers.insert(tensor.unsafeGetTensorImpl());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (in_layers.count(params_[i].second.unsafeGetTensorImpl()) != 0) continue;
    params_[i].second.mul_(1.0 - alpha).add_(other->params_[i].second.detach(), alpha);
  }
}

int64_t CausalLm::num_parameters() const {
  int64_t total = 0;
  for (const auto& [name, t] : params_) total += t.numel();
  for (const auto& [name, t] : lora_params_) total += t.numel();
  return total;
}

void CausalLm::ensure_rope_cache(int64_t length) {
  if (length <= rope_length_) return;
  // Grow geometrically so that slowly growing lengths do not recompute each call.
  length = std::max(length, std::min(2 * rope_length_, config_.max_position_embeddings));
  // Float32 as transformers computes it, rope scaling included.
  const at::Tensor inv_freq = rope_inv_freq(config_.rope_theta, config_.resolved_head_dim(), config_.rope_scaling);
  const at::Tensor positions = at::arange(length, at::kFloat);  // [L]
  const at::Tensor freqs = at::outer(positions, inv_freq);      // [L, d/2]
  const at::Tensor angles = at::cat({freqs, freqs}, -1);        // [L, d]
  // Computed on the host, as transformers' float32 tables, then moved once.
  rope_cos_ = angles.cos().to(device());
  rope_sin_ = angles.sin().to(device());
  rope_length_ = length;
}

at::Tensor CausalLm::rms_norm(const at::Tensor& x, const at::Tensor& weight) const {
  return fused::rms_norm(x, weight, config_.rms_norm_eps);
}

at::Tensor CausalLm::normed_rotary(const at::Tensor& heads, const at::Tensor& norm, const at::Tensor& cos,
                                   const at::Tensor& sin, double scale) const {
  return fused::rotary(norm.defined() ? rms_norm(heads, norm) : heads, cos, sin, scale);
}

// x: [B, T, H] → [B, T, H].
at::Tensor CausalLm::attention(const Layer& layer, const at::Tensor& x, const AttentionLayout& layout) const {
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
  const at::Tensor out =
      attention_compat::attend(q, k, v, layout.allowed, layout.blocked, compute_dtype_,
                               layout.sequence_starts);  // [B, heads, T, d]
  return projection(layer, LoraTarget::kO, out.transpose(1, 2).reshape({b, t, heads * d}), layout.lora_dropout);
}

at::Tensor CausalLm::mlp(const Layer& layer, const at::Tensor& x, const LoraDropout& dropout) const {
  const at::Tensor gate = projection(layer, LoraTarget::kGate, x, dropout);
  const at::Tensor up = projection(layer, LoraTarget::kUp, x, dropout);
  return projection(layer, LoraTarget::kDown, at::silu(gate) * up, dropout);
}

at::Tensor CausalLm::decoder_layer(size_t index, const at::Tensor& x, const AttentionLayout& layout) const {
  const Layer& layer = layers_.at(index);
  const at::Tensor h = x + attention(layer, rms_norm(x, layer.input_norm), layout);
  return h + mlp(layer, rms_norm(h, layer.post_norm), layout.lora_dropout);
}

CausalLm::AttentionLayout CausalLm::attention_layout(int64_t t, const at::Tensor& position_ids,
                                                     const at::Tensor& document_ids) {
  ensure_rope_cache(t);
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
  if (document_ids.defined() && !windowed && packed_flash_attention_applies(device(), compute_dtype_, config_.resolved_head_dim())) {
    layout.sequence_starts = packed_sequence_starts(document_ids);
    return layout;
  }
  const bool needs_mask = document_ids.defined() || windowed || !attention_compat::kFusedAttention;
  at::Tensor causal;  // [T, T] bool: query i may read key j
  if (needs_mask) {
    const at::Tensor slots = at::arange(t, embed_tokens_.options().dtype(at::kLong));
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

at::Tensor CausalLm::hidden_states(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                   const at::Tensor& document_ids) {
  TORCH_CHECK(input_ids.defined() && input_ids.dim() == 2, "input_ids must be [B, T], got ",
              input_ids.defined() ? shape_text(input_ids.sizes()) : "an undefined tensor");
  TORCH_CHECK(input_ids.scalar_type() == at::kLong, "input_ids must be int64, got ", input_ids.scalar_type());
  TORCH_CHECK(input_ids.numel() > 0, "input_ids is empty: ", input_ids.sizes());
  const int64_t t = input_ids.size(1);
  TORCH_CHECK(t <= config_.max_position_embeddings, "input_ids has ", t,
              " positions, more than max_position_embeddings = ", config_.max_position_embeddings);
  // Value checks read tensors back: free on the host, a device sync on a GPU,
  // where ids come from host-side collation that the host already checked.
  const bool check_values = input_ids.is_cpu();
  if (check_values) {
    const auto [min_id, max_id] = host_value_range(input_ids);
    TORCH_CHECK(min_id >= 0 && max_id < config_.vocab_size, "input_ids values must be in [0, ", config_.vocab_size,
                "), got range [", min_id, ", ", max_id, "]");
  }
  for (const at::Tensor* ids : {&position_ids, &document_ids}) {
    TORCH_CHECK(!ids->defined() || (ids->sizes() == input_ids.sizes() && ids->scalar_type() == at::kLong),
                ids == &position_ids ? "position_ids" : "document_ids", " must be int64 of the shape of input_ids ",
                input_ids.sizes(), ", got ", ids->defined() ? shape_text(ids->sizes()) : "");
  }
  if (check_values && position_ids.defined()) {
    const auto [min_position, max_position] = host_value_range(position_ids);
    TORCH_CHECK(min_position >= 0 && max_position < t, "position_ids values must be in [0, ", t, ")");
  }

  AttentionLayout layout = attention_layout(t, position_ids, document_ids);
  // Adapter dropout is for training: a forward that records gradients.
  // Scoring without them (references, evaluation, old log-probs) sees no dropout.
  if (lora_ && lora_->dropout > 0.0 && at::GradMode::is_enabled()) {
    layout.lora_dropout = {lora_->dropout, true, dropout_seed()};
  }
  // Recomputing layers in backward only pays when there is a backward.
  const bool grad = at::GradMode::is_enabled();
  // A sharded model recomputes its layers in backward only when they train
  // (a frozen reference's forward gathers, runs and releases each layer).
  const bool checkpoint = grad && (activation_checkpointing_ || (layer_source_ != nullptr && !layers_.empty() &&
                                                                  !layer_parameters(0).empty()));
  at::Tensor x = at::embedding(embed_tokens_, input_ids);  // [B, T, H]
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (checkpoint) {
      x = checkpointed_layer(i, x, layout);
    } else if (layer_source_ != nullptr) {
      gather_layer(i, +1);
      x = decoder_layer(i, x, layout);
      layer_source_->release(i);
    } else {
      x = decoder_layer(i, x, layout);
    }
  }
  return rms_norm(x, final_norm_);
}

at::Tensor CausalLm::logits(const at::Tensor& input_ids) {
  return dense(hidden_states(on_model_device(input_ids), {}, {}), lm_head_weight());  // [B, T, V]
}

sdk::TargetLogProbs CausalLm::target_log_probs(const sdk::TokenBatch& batch) { return score_targets(batch, false); }

sdk::TargetLogProbs CausalLm::target_log_probs_and_entropy(const sdk::TokenBatch& batch) {
  return score_targets(batch, true);
}

at::Tensor CausalLm::on_model_device(const at::Tensor& t) const {
  return t.defined() && t.device() != device() ? t.to(device()) : t;
}

sdk::TargetLogProbs CausalLm::score_targets(const sdk::TokenBatch& host_batch, bool with_entropy) {
  // Plugins collate on the host; the batch follows the weights (a no-op on the CPU).
  sdk::TokenBatch batch = host_batch;
  for (at::Tensor* t :
       {&batch.input_ids, &batch.target_ids, &batch.loss_mask, &batch.position_ids, &batch.document_ids}) {
    *t = on_model_device(*t);
  }
  const at::Tensor& input_ids = batch.input_ids;
  const at::Tensor& target_ids = batch.target_ids;
  const at::Tensor& loss_mask = batch.loss_mask;
  TORCH_CHECK(input_ids.defined() && input_ids.dim() == 2, "input_ids must be [B, T], got ",
              input_ids.defined() ? shape_text(input_ids.sizes()) : "an undefined tensor");
  TORCH_CHECK(target_ids.defined() && target_ids.sizes() == input_ids.sizes(),
              "target_ids must have the shape of input_ids ", input_ids.sizes(), ", got ",
              target_ids.defined() ? shape_text(target_ids.sizes()) : "an undefined tensor");
  TORCH_CHECK(target_ids.scalar_type() == at::kLong, "target_ids must be int64, got ", target_ids.scalar_type());
  TORCH_CHECK(loss_mask.defined() && loss_mask.sizes() == input_ids.sizes(),
              "loss_mask must have the shape of input_ids ", input_ids.sizes(), ", got ",
              loss_mask.defined() ? shape_text(loss_mask.sizes()) : "an undefined tensor");
  TORCH_CHECK(loss_mask.scalar_type() == at::kBool, "loss_mask must be bool, got ", loss_mask.scalar_type());

  // As in hidden_states: no value check (a device sync) on a GPU.
  if (target_ids.is_cpu()) {
    const std::optional<std::pair<int64_t, int64_t>> range = host_masked_value_range(target_ids, loss_mask);
    TORCH_CHECK(!range || (range->first >= 0 && range->second < config_.vocab_size),
                "target_ids values at loss_mask positions must be in [0, ", config_.vocab_size, "), got range [",
                range ? range->first : 0, ", ", range ? range->second : 0, "]");
  }
  const at::Tensor hidden = hidden_states(input_ids, batch.position_ids, batch.document_ids);  // [B, T, H]
  const TargetScores scores =
      score_masked_targets(hidden, lm_head_weight(), target_ids, loss_mask, with_entropy, compute_dtype_);
  sdk::TargetLogProbs out;
  out.log_probs = scores.log_probs;
  out.is_argmax = scores.is_argmax;
  if (with_entropy) out.entropy = scores.entropy;
  return out;
}

}  // namespace ptrain::model
