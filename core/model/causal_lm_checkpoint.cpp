// Activation checkpointing (Chen et al. 2016, "Training Deep Nets with
// Sublinear Memory Cost"): each decoder layer keeps only its input during the
// forward pass and runs again in backward to rebuild what its gradient needs.
// Activations then cost one [B, T, H] tensor per layer instead of every
// intermediate, for one extra layer forward per backward. The recomputation
// is deterministic (LoRA's dropout masks are drawn again from the same seed),
// so gradients are the same.
//
// Under sharding "full" the same node gathers the layer's parameters around
// its forward and its recomputation, and hands their gradients to the
// LayerParameterSource instead of returning them (causal_lm.h).
#include "core/model/causal_lm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

namespace ptrain::model {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CausalLm::CheckpointFunction : public torch::autograd::Function<CausalLm::CheckpointFunction> {
  // `parameters` are the layer's weights: passing them as inputs is what
  // links this node to their gradient accumulators.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const CausalLm* model, int64_t index,
                               const AttentionLayout* layout, at::TensorList parameters) {
    ctx->saved_data["parameter_inputs"] = static_cast<int64_t>(parameters.size());
    ctx->save_for_backward({x});
    // An autograd context stores only IValues: the model by address (it
    // outlives the backward of its own forward) and the layout's tensors.
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(model);
    ctx->saved_data["index"] = index;
    ctx->saved_data["cos"] = layout->cos;
    ctx->saved_data["sin"] = layout->sin;
    if (layout->allowed.defined()) ctx->saved_data["allowed"] = layout->allowed;
    if (layout->blocked.defined()) ctx->saved_data["blocked"] = layout->blocked;
    // The adapters' dropout masks follow from the seed: the recomputation draws the same ones.
    ctx->saved_data["dropout_active"] = layout->lora_dropout.active;
    ctx->saved_data["dropout_probability"] = layout->lora_dropout.probability;
    ctx->saved_data["dropout_seed"] = static_cast<int64_t>(layout->lora_dropout.seed);
    LayerParameterSource* source = model->layer_source_;
    if (source != nullptr) model->gather_layer(static_cast<size_t>(index), +1);
    at::Tensor y = model->decoder_layer(static_cast<size_t>(index), x, *layout);  // autograd is off in forward
    if (source != nullptr) source->release(static_cast<size_t>(index));
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto* model = reinterpret_cast<const CausalLm*>(ctx->saved_data["model"].toInt());
    const auto index = static_cast<size_t>(ctx->saved_data["index"].toInt());
    AttentionLayout layout;
    layout.cos = ctx->saved_data["cos"].toTensor();
    layout.sin = ctx->saved_data["sin"].toTensor();
    if (ctx->saved_data.count("allowed")) layout.allowed = ctx->saved_data["allowed"].toTensor();
    if (ctx->saved_data.count("blocked")) layout.blocked = ctx->saved_data["blocked"].toTensor();
    layout.lora_dropout.active = ctx->saved_data["dropout_active"].toBool();
    layout.lora_dropout.probability = ctx->saved_data["dropout_probability"].toDouble();
    layout.lora_dropout.seed = static_cast<uint64_t>(ctx->saved_data["dropout_seed"].toInt());

    const at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    LayerParameterSource* source = model->layer_source_;
    if (source != nullptr) model->gather_layer(index, -1);
    const std::vector<at::Tensor> parameters = model->layer_parameters(index);
    std::vector<at::Tensor> inputs{x};
    inputs.insert(inputs.end(), parameters.begin(), parameters.end());
    at::Tensor y;
    {
      const at::AutoGradMode enable_grad(true);
      y = model->decoder_layer(index, x, layout);
    }
    variable_list grads = torch::autograd::grad({y}, inputs, {grad_outputs[0]}, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    // One entry per forward argument: x, model, index, layout, then each parameter.
    variable_list result{grads[0], at::Tensor(), at::Tensor(), at::Tensor()};
    if (source != nullptr) {
      if (!parameters.empty()) source->add_gradients(index, std::vector<at::Tensor>(grads.begin() + 1, grads.end()));
      grads.clear();  // the full-size gradients go before the parameters do
      source->release(index);
      result.resize(result.size() + ctx->saved_data["parameter_inputs"].toInt());  // nothing for .grad
    } else {
      result.insert(result.end(), grads.begin() + 1, grads.end());
    }
    return result;
  }
};

void CausalLm::gather_layer(size_t index, int direction) const {
  layer_source_->gather(index);
  const auto next = static_cast<int64_t>(index) + direction;
  if (next >= 0 && next < static_cast<int64_t>(layers_.size())) layer_source_->prefetch(static_cast<size_t>(next));
}

std::vector<const at::Tensor*> CausalLm::base_tensors(const Layer& layer) {
  return {&layer.input_norm, &layer.q_weight, &layer.q_bias, &layer.k_weight, &layer.k_bias,
          &layer.v_weight,   &layer.v_bias,   &layer.o_weight, &layer.o_bias, &layer.q_norm,
          &layer.k_norm,     &layer.post_norm, &layer.gate_weight, &layer.up_weight, &layer.down_weight};
}

std::vector<at::Tensor> CausalLm::layer_tensors(size_t index) const {
  std::vector<at::Tensor> tensors;
  for (const at::Tensor* t : base_tensors(layers_.at(index))) {
    if (t->defined()) tensors.push_back(*t);
  }
  return tensors;
}

std::vector<at::Tensor> CausalLm::layer_parameters(size_t index) const {
  const Layer& layer = layers_.at(index);
  std::vector<at::Tensor> parameters;
  for (const at::Tensor* t : base_tensors(layer)) {
    if (t->defined() && t->requires_grad()) parameters.push_back(*t);
  }
  for (const LoraPair& pair : layer.lora) {
    if (pair.defined() && pair.a.requires_grad()) parameters.insert(parameters.end(), {pair.a, pair.b});
  }
  return parameters;
}

at::Tensor CausalLm::checkpointed_layer(size_t index, const at::Tensor& x, const AttentionLayout& layout) const {
  // Sharded, the parameters are empty now: as inputs they would fix their
  // gradient accumulators' shape at 0 elements. A 0-element stand-in that
  // requires grad keeps the node in the graph even where x does not.
  const std::vector<at::Tensor> parameters =
      layer_source_ == nullptr ? layer_parameters(index)
                               : std::vector<at::Tensor>{at::empty({0}, x.options()).requires_grad_(true)};
  return CheckpointFunction::apply(x, this, static_cast<int64_t>(index), &layout, at::TensorList(parameters))[0];
}

}  // namespace ptrain::model
