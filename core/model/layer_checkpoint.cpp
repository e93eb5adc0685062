#include "core/model/layer_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

namespace ptrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  // `parameters` are the layer's weights: passing them as inputs is what
  // links this node to their gradient accumulators.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const Decoder* decoder,
                               LayerParameterSource* source, int64_t index, const AttentionLayout* layout,
                               at::TensorList parameters) {
    ctx->saved_data["parameter_inputs"] = static_cast<int64_t>(parameters.size());
    ctx->save_for_backward({x});
    // An autograd context stores only IValues: the decoder and the source by
    // address (they outlive the backward of their own forward) and the
    // layout's tensors.
    ctx->saved_data["decoder"] = reinterpret_cast<int64_t>(decoder);
    ctx->saved_data["source"] = reinterpret_cast<int64_t>(source);
    ctx->saved_data["index"] = index;
    ctx->saved_data["cos"] = layout->cos;
    ctx->saved_data["sin"] = layout->sin;
    if (layout->allowed.defined()) ctx->saved_data["allowed"] = layout->allowed;
    if (layout->blocked.defined()) ctx->saved_data["blocked"] = layout->blocked;
    // Packed rows on CUDA: the recomputation must keep each document to itself too.
    if (layout->sequence_starts.defined()) ctx->saved_data["sequence_starts"] = layout->sequence_starts;
    // The adapters' dropout masks follow from the seed: the recomputation draws the same ones.
    ctx->saved_data["dropout_active"] = layout->lora_dropout.active;
    ctx->saved_data["dropout_probability"] = layout->lora_dropout.probability;
    ctx->saved_data["dropout_seed"] = static_cast<int64_t>(layout->lora_dropout.seed);
    const auto layer = static_cast<size_t>(index);
    if (source != nullptr) gather_layer(*source, layer, +1, decoder->num_layers());
    at::Tensor y = decoder->layer_forward(layer, x, *layout);  // autograd is off in forward
    if (source != nullptr) source->release(layer);
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto* decoder = reinterpret_cast<const Decoder*>(ctx->saved_data["decoder"].toInt());
    auto* source = reinterpret_cast<LayerParameterSource*>(ctx->saved_data["source"].toInt());
    const auto index = static_cast<size_t>(ctx->saved_data["index"].toInt());
    AttentionLayout layout;
    layout.cos = ctx->saved_data["cos"].toTensor();
    layout.sin = ctx->saved_data["sin"].toTensor();
    if (ctx->saved_data.count("allowed")) layout.allowed = ctx->saved_data["allowed"].toTensor();
    if (ctx->saved_data.count("blocked")) layout.blocked = ctx->saved_data["blocked"].toTensor();
    if (ctx->saved_data.count("sequence_starts")) {
      layout.sequence_starts = ctx->saved_data["sequence_starts"].toTensor();
    }
    layout.lora_dropout.active = ctx->saved_data["dropout_active"].toBool();
    layout.lora_dropout.probability = ctx->saved_data["dropout_probability"].toDouble();
    layout.lora_dropout.seed = static_cast<uint64_t>(ctx->saved_data["dropout_seed"].toInt());

    const at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    if (source != nullptr) gather_layer(*source, index, -1, decoder->num_layers());
    const std::vector<at::Tensor> parameters = decoder->layer_parameters(index);
    std::vector<at::Tensor> inputs{x};
    inputs.insert(inputs.end(), parameters.begin(), parameters.end());
    at::Tensor y;
    {
      const at::AutoGradMode enable_grad(true);
      y = decoder->layer_forward(index, x, layout);
    }
    variable_list grads = torch::autograd::grad({y}, inputs, {grad_outputs[0]}, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    // One entry per forward argument: x, decoder, source, index, layout, then each parameter.
    variable_list result{grads[0], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
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

}  // namespace

at::Tensor checkpointed_layer(const Decoder& decoder, LayerParameterSource* source, size_t index, const at::Tensor& x,
                              const AttentionLayout& layout) {
  // Sharded, the parameters are empty now: as inputs they would fix their
  // gradient accumulators' shape at 0 elements. A 0-element stand-in that
  // requires grad keeps the node in the graph even where x does not.
  const std::vector<at::Tensor> parameters =
      source == nullptr ? decoder.layer_parameters(index)
                        : std::vector<at::Tensor>{at::empty({0}, x.options()).requires_grad_(true)};
  return CheckpointFunction::apply(x, &decoder, source, static_cast<int64_t>(index), &layout,
                                   at::TensorList(parameters))[0];
}

}  // namespace ptrain::model
