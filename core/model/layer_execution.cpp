#include "core/model/layer_execution.h"

#include "core/model/layer_checkpoint.h"

#include <ATen/core/grad_mode.h>

namespace ptrain::model {
namespace {

class PlainLayers final : public LayerExecution {
 public:
  at::Tensor run_layer(const Decoder& decoder, size_t index, const at::Tensor& x,
                       const AttentionLayout& layout) const override {
    return decoder.layer_forward(index, x, layout);
  }
};

class CheckpointedLayers final : public LayerExecution {
 public:
  at::Tensor run_layer(const Decoder& decoder, size_t index, const at::Tensor& x,
                       const AttentionLayout& layout) const override {
    // Recomputing layers in backward only pays when there is a backward.
    if (!at::GradMode::is_enabled()) return decoder.layer_forward(index, x, layout);
    return checkpointed_layer(decoder, nullptr, index, x, layout);
  }
  bool checkpoints_activations() const override { return true; }
};

class GatheredLayers final : public LayerExecution {
 public:
  GatheredLayers(LayerParameterSource& source, bool checkpoint_activations)
      : source_(source), checkpoint_activations_(checkpoint_activations) {}

  at::Tensor run_layer(const Decoder& decoder, size_t index, const at::Tensor& x,
                       const AttentionLayout& layout) const override {
    // The layers are recomputed in backward only when they train (a frozen
    // reference's forward gathers, runs and releases each layer).
    const bool recompute = at::GradMode::is_enabled() &&
                           (checkpoint_activations_ || !decoder.layer_parameters(0).empty());
    if (recompute) return checkpointed_layer(decoder, &source_, index, x, layout);
    gather_layer(source_, index, +1, decoder.num_layers());
    at::Tensor y = decoder.layer_forward(index, x, layout);
    source_.release(index);
    return y;
  }
  LayerParameterSource* layer_source() const override { return &source_; }
  bool checkpoints_activations() const override { return checkpoint_activations_; }

 private:
  LayerParameterSource& source_;
  bool checkpoint_activations_;
};

}  // namespace

std::unique_ptr<LayerExecution> plain_layers() { return std::make_unique<PlainLayers>(); }

std::unique_ptr<LayerExecution> checkpointed_layers() { return std::make_unique<CheckpointedLayers>(); }

std::unique_ptr<LayerExecution> gathered_layers(LayerParameterSource& source, bool checkpoint_activations) {
  return std::make_unique<GatheredLayers>(source, checkpoint_activations);
}

}  // namespace ptrain::model
