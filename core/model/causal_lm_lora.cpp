// CausalLm's LoRA adapters (lora.h): adding them, binding them to the
// layers, loading saved values, and the two adapter-free views of the model
// (the shared base, the merged copy).
#include "core/model/causal_lm.h"
#include "core/model/finite_weights.h"
#include "core/model/shape_text.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <map>

namespace ptrain::model {
namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace

uint64_t CausalLm::dropout_seed() {
  // splitmix64-style mixing keeps nearby (step, forward) pairs far apart.
  uint64_t z = lora_seed_ + 0x9E3779B97F4A7C15ull * (lora_step_ + 1) + 0xBF58476D1CE4E5B9ull * ++lora_forwards_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void CausalLm::add_lora(const LoraSpec& spec, uint64_t seed) {
  spec.validate();
  TORCH_CHECK(!lora_, "add_lora: the model already has LoRA adapters");
  for (auto& [name, t] : params_) t.requires_grad_(false);
  // Drawn on the host in named_parameters() order, so the adapters depend on
  // the seed alone, as init_random's weights do.
  at::Generator generator = at::detail::createCPUGenerator(seed);
  for (const DecoderLayer& layer : decoder_.layers()) {
    for (const LoraTarget target : all_lora_targets()) {
      if (!spec.wraps(target)) continue;
      const at::Tensor& weight = layer.weight(target);  // [out, in]
      const LoraPair pair = init_lora_pair(spec.rank, weight.size(1), weight.size(0), generator);
      const auto index = static_cast<int64_t>(layer.index);
      lora_params_.emplace_back(lora_key(index, target, 'A'), pair.a.to(device()).requires_grad_(true));
      lora_params_.emplace_back(lora_key(index, target, 'B'), pair.b.to(device()).requires_grad_(true));
    }
  }
  lora_ = spec;
  lora_seed_ = seed;
  bind_lora_handles();
}

void CausalLm::bind_lora_handles() {
  if (!lora_) return;
  decoder_.set_lora_scale(lora_->scale());
  size_t next = 0;
  for (DecoderLayer& layer : decoder_.layers()) {
    for (const LoraTarget target : all_lora_targets()) {
      if (!lora_->wraps(target)) continue;
      TORCH_INTERNAL_ASSERT(next + 1 < lora_params_.size(), "LoRA adapter order");
      LoraPair& pair = layer.lora[static_cast<size_t>(target)];
      pair.a = lora_params_[next++].second;
      pair.b = lora_params_[next++].second;
    }
  }
  TORCH_INTERNAL_ASSERT(next == lora_params_.size(), "LoRA adapter order: unused tensors");
}

void CausalLm::load_lora_weights(const NamedTensors& weights, const std::string& source) {
  if (!lora_) throw sdk::ModelError(source + ": LoRA adapters given for a model without [lora]");
  std::map<std::string, at::Tensor> by_name(weights.begin(), weights.end());
  const at::NoGradGuard no_grad;
  for (auto& [name, target] : lora_params_) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      throw sdk::ModelError(source + ": tensor '" + name + "' is missing (expected shape " +
                            shape_text(target.sizes()) + ")");
    }
    if (!it->second.sizes().equals(target.sizes())) {
      throw sdk::ModelError(source + ": tensor '" + name + "' has shape " + shape_text(it->second.sizes()) +
                            ", expected " + shape_text(target.sizes()));
    }
    if (!at::isFloatingType(it->second.scalar_type())) {
      throw sdk::ModelError(source + ": tensor '" + name + "' is not floating point");
    }
    require_finite_weights(it->second, name, source);
    target.copy_(it->second);
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    throw sdk::ModelError(source + ": unexpected tensor '" + by_name.begin()->first + "' for LoRA rank " +
                          std::to_string(lora_->rank) + " on this model's target modules");
  }
}

std::unique_ptr<CausalLm> CausalLm::base_model() const {
  NamedTensors shared;
  shared.reserve(params_.size());
  for (const auto& [name, t] : params_) shared.emplace_back(name, t.detach());
  auto base = std::unique_ptr<CausalLm>(new CausalLm(config(), std::move(shared)));
  base->stored_dtype_ = stored_dtype_;
  base->decoder_.set_compute_dtype(compute_dtype());
  base->source_dir_ = source_dir_;
  return base;
}

std::unique_ptr<CausalLm> CausalLm::merged_copy() const {
  std::unique_ptr<CausalLm> merged = base_model();
  const at::NoGradGuard no_grad;
  for (auto& [name, t] : merged->params_) t = t.clone();
  merged->bind_handles();
  if (!lora_) return merged;
  for (DecoderLayer& layer : merged->decoder_.layers()) {
    for (const LoraTarget target : all_lora_targets()) {
      const LoraPair& pair = decoder_.layers()[layer.index].lora[static_cast<size_t>(target)];
      // ΔW = (alpha / r) · B A, in float32 whatever the compute dtype.
      if (pair.defined()) layer.weight(target).add_(at::mm(pair.b, pair.a), lora_->scale());
    }
  }
  return merged;
}

}  // namespace ptrain::model
