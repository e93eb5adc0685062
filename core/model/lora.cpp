#include "core/model/lora.h"

#include "core/model/gemm.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

namespace ptrain::model {
namespace {

const std::array<std::string, kLoraTargetCount>& target_names() {
  static const std::array<std::string, kLoraTargetCount> names{"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                               "gate_proj", "up_proj", "down_proj"};
  return names;
}

// The module path inside a decoder layer, as transformers names it.
std::string module_path(LoraTarget target) {
  const bool attention =
      target == LoraTarget::kQ || target == LoraTarget::kK || target == LoraTarget::kV || target == LoraTarget::kO;
  return (attention ? "self_attn." : "mlp.") + lora_target_name(target);
}

}  // namespace

const std::array<LoraTarget, kLoraTargetCount>& all_lora_targets() {
  static const std::array<LoraTarget, kLoraTargetCount> targets{LoraTarget::kQ,   LoraTarget::kK,    LoraTarget::kV,
                                                                LoraTarget::kO,   LoraTarget::kGate, LoraTarget::kUp,
                                                                LoraTarget::kDown};
  return targets;
}

const std::string& lora_target_name(LoraTarget target) { return target_names().at(static_cast<size_t>(target)); }

std::optional<LoraTarget> lora_target_from_name(const std::string& name) {
  const auto& names = target_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return std::nullopt;
  return all_lora_targets().at(static_cast<size_t>(it - names.begin()));
}

bool LoraSpec::wraps(LoraTarget target) const {
  return std::find(targets.begin(), targets.end(), target) != targets.end();
}

void LoraSpec::validate() const {
  if (rank < 1) throw sdk::ModelError("LoRA rank must be >= 1, got " + std::to_string(rank));
  if (!(alpha > 0.0)) throw sdk::ModelError("LoRA alpha must be > 0, got " + std::to_string(alpha));
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw sdk::ModelError("LoRA dropout must be in [0, 1), got " + std::to_string(dropout));
  }
  if (targets.empty()) throw sdk::ModelError("LoRA needs at least one target module");
  for (size_t i = 0; i < targets.size(); ++i) {
    if (std::count(targets.begin(), targets.end(), targets[i]) > 1) {
      throw sdk::ModelError("LoRA target module '" + lora_target_name(targets[i]) + "' is listed twice");
    }
  }
}

std::string lora_key(int64_t layer, LoraTarget target, char which) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + module_path(target) + ".lora_" +
         std::string(1, which) + ".weight";
}

LoraPair init_lora_pair(int64_t rank, int64_t in_features, int64_t out_features, at::Generator& generator) {
  // kaiming_uniform_(a = √5): gain √(2 / (1 + a²)) = √(1/3), bound
  // gain · √(3 / fan_in) = 1 / √fan_in, with fan_in = in_features.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  LoraPair pair;
  pair.a = at::empty({rank, in_features}, at::kFloat).uniform_(-bound, bound, generator);
  pair.b = at::zeros({out_features, rank}, at::kFloat);
  return pair;
}

at::Tensor lora_update(const at::Tensor& x, const LoraPair& pair, double scale, const LoraDropout& dropout,
                       uint64_t stream, at::ScalarType operands) {
  at::Tensor input = x;
  if (dropout.active && dropout.probability > 0.0) {
    // Drawn on the host from (seed, stream) alone: the same masks again when
    // activation checkpointing recomputes the layer.
    at::Generator generator = at::detail::createCPUGenerator(dropout.seed * 0x9E3779B97F4A7C15ull + stream);
    const double keep = 1.0 - dropout.probability;
    const at::Tensor mask = at::empty(x.sizes(), at::kFloat).bernoulli_(keep, generator).div_(keep);
    input = x * mask.to(x.device());
  }
  const at::Tensor low = model::linear(input, pair.a, {}, operands);  // [..., r]
  return model::linear(low, pair.b, {}, operands).mul(scale);         // [..., out]
}

}  // namespace ptrain::model
