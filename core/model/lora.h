// LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
// Models"): a frozen linear layer W gains a trainable low-rank update,
//
//   y = W x + (alpha / r) · B A dropout(x),   A: [r, in], B: [out, r]
//
// (alpha / √r with rsLoRA, Kalajdzievski 2023, "A Rank Stabilization Scaling
// Factor for Fine-Tuning with LoRA", as PEFT's use_rslora).
//
// A starts as PEFT starts it (nn.init.kaiming_uniform_ with a = √5, i.e.
// U(−1/√in, 1/√in)) and B = 0, so training starts exactly at the base model.
// The adapters keep PEFT's key names (lora_key) so that a saved adapter
// directory loads with peft.PeftModel.from_pretrained.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::model {

// The seven projections of a decoder layer an adapter can wrap, in
// transformers' module order.
enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr size_t kLoraTargetCount = 7;
const std::array<LoraTarget, kLoraTargetCount>& all_lora_targets();

// "q_proj", ..., "down_proj": the names PEFT's target_modules uses.
const std::string& lora_target_name(LoraTarget target);
std::optional<LoraTarget> lora_target_from_name(const std::string& name);

struct LoraSpec {
  int64_t rank = 0;      // r; 0: no adapters
  double alpha = 16.0;   // ΔW = (alpha / rank) · B A
  double dropout = 0.0;  // on the adapter's input, while training only; in [0, 1)
  std::vector<LoraTarget> targets;
  bool use_rslora = false;  // rank-stabilized LoRA (PEFT's use_rslora): ΔW = (alpha / √rank) · B A

  double scale() const {
    return alpha / (use_rslora ? std::sqrt(static_cast<double>(rank)) : static_cast<double>(rank));
  }
  bool wraps(LoraTarget target) const;
  // Throws sdk::ModelError naming the first bad field.
  void validate() const;
};

// One wrapped projection's adapter; undefined tensors when not targeted.
struct LoraPair {
  at::Tensor a;  // [r, in]
  at::Tensor b;  // [out, r]
  bool defined() const { return a.defined(); }
};

// PEFT's key of a layer's adapter matrix: which = 'A' or 'B', e.g.
// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight".
std::string lora_key(int64_t layer, LoraTarget target, char which);

// A freshly initialised adapter for a [out, in] projection: A Kaiming-uniform
// from `generator`, B zero; float32 on the CPU.
LoraPair init_lora_pair(int64_t rank, int64_t in_features, int64_t out_features, at::Generator& generator);

// Which adapter-input dropout a forward applies: none (inference, no
// gradients), or masks drawn from `seed`, so that recomputing a layer under
// activation checkpointing draws the same masks.
struct LoraDropout {
  double probability = 0.0;
  bool active = false;
  uint64_t seed = 0;
};

// (alpha / r) · B A dropout(x) for x [..., in] → [..., out], the products at
// `operands` precision (model::linear). `stream` tells apart the masks of the
// projections within one forward (layer and target).
at::Tensor lora_update(const at::Tensor& x, const LoraPair& pair, double scale, const LoraDropout& dropout,
                       uint64_t stream, at::ScalarType operands);

}  // namespace ptrain::model
