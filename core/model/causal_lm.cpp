#include "core/model/causal_lm.h"

#include "core/model/hf_model_dir.h"
#include "core/model/parameter_names.h"
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

CausalLm::CausalLm(ModelConfig config, NamedTensors params) : decoder_(std::move(config)), params_(std::move(params)) {
  bind_handles();
}

void CausalLm::bind_handles() {
  const ModelConfig& config = this->config();
  const bool qkv_bias = config.qkv_bias;
  const bool o_bias = config.o_bias;
  size_t next = 0;
  auto take = [&](const char* suffix) -> at::Tensor {
    TORCH_INTERNAL_ASSERT(next < params_.size() && ends_with(params_[next].first, suffix), "parameter order: expected ",
                          suffix, " at ", next);
    return params_[next++].second;
  };
  embed_tokens_ = take("model.embed_tokens.weight");
  std::vector<DecoderLayer>& layers = decoder_.layers();
  layers.assign(config.num_layers, DecoderLayer{});
  for (DecoderLayer& layer : layers) {
    layer.index = static_cast<size_t>(&layer - layers.data());
    layer.q_weight = take("q_proj.weight");
    if (qkv_bias) layer.q_bias = take("q_proj.bias");
    layer.k_weight = take("k_proj.weight");
    if (qkv_bias) layer.k_bias = take("k_proj.bias");
    layer.v_weight = take("v_proj.weight");
    if (qkv_bias) layer.v_bias = take("v_proj.bias");
    layer.o_weight = take("o_proj.weight");
    if (o_bias) layer.o_bias = take("o_proj.bias");
    if (config.has_qk_norm()) {
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
  if (!config.tie_word_embeddings) lm_head_ = take("lm_head.weight");
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
  decoder_.set_compute_dtype(dtype);
}

void CausalLm::to_device(at::Device device) {
  if (device == this->device()) return;
  for (auto& [name, t] : params_) t = t.detach().to(device).requires_grad_(t.requires_grad());
  for (auto& [name, t] : lora_params_) t = t.detach().to(device).requires_grad_(t.requires_grad());
  bind_handles();
  decoder_.clear_rope_cache();  // the rotary tables are rebuilt on the new device
}

NamedTensors CausalLm::named_parameters() const { return lora_ ? lora_params_ : params_; }

std::unique_ptr<CausalLm> CausalLm::frozen_copy() const {
  // A LoRA model's base weights never change: the copy shares them. A model
  // sharded by layer (sharding "full") is whole while it is copied.
  NamedTensors copies;
  copies.reserve(params_.size());
  LayerParameterSource* source = layer_source();
  for (size_t i = 0; source != nullptr && i < num_layers(); ++i) source->gather(i);
  for (const auto& [name, t] : params_) copies.emplace_back(name, lora_ ? t.detach() : t.detach().clone());
  for (size_t i = 0; source != nullptr && i < num_layers(); ++i) source->release(i);
  auto copy = std::unique_ptr<CausalLm>(new CausalLm(config(), std::move(copies)));
  copy->stored_dtype_ = stored_dtype_;
  copy->decoder_.set_compute_dtype(compute_dtype());
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
  if (other == nullptr || other->config() != config()) {
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
  LayerParameterSource* own_source = layer_source();
  LayerParameterSource* other_source = other->layer_source();
  if (own_source == nullptr && other_source == nullptr) {
    for (size_t i = 0; i < params_.size(); ++i) {
      params_[i].second.mul_(1.0 - alpha).add_(other->params_[i].second.detach(), alpha);
    }
    return;
  }
  // Sharded by layer (sharding "full"): both are, alike; the layers blend
  // chunk by chunk, the tensors outside them whole.
  if (own_source == nullptr || other_source == nullptr) {
    throw sdk::ModelError("soft_update_from: one model is sharded by layer and the other is not");
  }
  own_source->blend_from(*other_source, alpha);
  std::set<const void*> in_layers;
  for (size_t i = 0; i < num_layers(); ++i) {
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

at::Tensor CausalLm::hidden_states(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                   const at::Tensor& document_ids) {
  TORCH_CHECK(input_ids.defined() && input_ids.dim() == 2, "input_ids must be [B, T], got ",
              input_ids.defined() ? shape_text(input_ids.sizes()) : "an undefined tensor");
  TORCH_CHECK(input_ids.scalar_type() == at::kLong, "input_ids must be int64, got ", input_ids.scalar_type());
  TORCH_CHECK(input_ids.numel() > 0, "input_ids is empty: ", input_ids.sizes());
  const int64_t t = input_ids.size(1);
  const ModelConfig& config = this->config();
  TORCH_CHECK(t <= config.max_position_embeddings, "input_ids has ", t,
              " positions, more than max_position_embeddings = ", config.max_position_embeddings);
  // Value checks read tensors back: free on the host, a device sync on a GPU,
  // where ids come from host-side collation that the host already checked.
  const bool check_values = input_ids.is_cpu();
  if (check_values) {
    const auto [min_id, max_id] = host_value_range(input_ids);
    TORCH_CHECK(min_id >= 0 && max_id < config.vocab_size, "input_ids values must be in [0, ", config.vocab_size,
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

  AttentionLayout layout = decoder_.attention_layout(t, position_ids, document_ids, device());
  // Adapter dropout is for training: a forward that records gradients.
  // Scoring without them (references, evaluation, old log-probs) sees no dropout.
  if (lora_ && lora_->dropout > 0.0 && at::GradMode::is_enabled()) {
    layout.lora_dropout = {lora_->dropout, true, dropout_seed()};
  }
  // Checkpointing and sharding are in how each layer runs (model_transforms.h).
  at::Tensor x = at::embedding(embed_tokens_, input_ids);  // [B, T, H]
  for (size_t i = 0; i < num_layers(); ++i) x = layer_execution_->run_layer(decoder_, i, x, layout);
  return decoder_.rms_norm(x, final_norm_);
}

at::Tensor CausalLm::logits(const at::Tensor& input_ids) {
  return decoder_.dense(hidden_states(on_model_device(input_ids), {}, {}), lm_head_weight());  // [B, T, V]
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
    TORCH_CHECK(!range || (range->first >= 0 && range->second < vocab_size()),
                "target_ids values at loss_mask positions must be in [0, ", vocab_size(), "), got range [",
                range ? range->first : 0, ", ", range ? range->second : 0, "]");
  }
  const at::Tensor hidden = hidden_states(input_ids, batch.position_ids, batch.document_ids);  // [B, T, H]
  const TargetScores scores =
      score_masked_targets(hidden, lm_head_weight(), target_ids, loss_mask, with_entropy, compute_dtype());
  sdk::TargetLogProbs out;
  out.log_probs = scores.log_probs;
  out.is_argmax = scores.is_argmax;
  if (with_entropy) out.entropy = scores.entropy;
  return out;
}

}  // namespace ptrain::model
