// Sharding "optimizer" (ZeRO-1/2, docs/distributed.md#sharding-distributedsharding): each rank owns a chunk of
// every gradient bucket (dist/bucket_layout.h) and keeps the optimizer state
// of those elements only. After the reduce-scatter, it clips with the global
// norm (Σ over ranks of its chunks' squared norms), steps AdamW or SGD on its
// pieces of the parameters in place, and the updated pieces are all-gathered
// into every rank's parameters. The optimizer runs elementwise, so each
// element sees the same arithmetic as under sharding "none".
//
// The parameters are float32 in every precision mode (bf16-mixed casts only
// the matrix products' operands), so a rank's pieces are views of them and
// serve as its master weights; nothing else is copied.
#pragma once

#include "core/train/optimizer.h"
#include "core/train/weight_update.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::train {

class ShardedUpdate final : public WeightUpdate {
 public:
  // `grad_sync` is sharded and outlives this object.
  ShardedUpdate(const config::OptimSection& optim,
                const std::vector<std::pair<std::string, at::Tensor>>& named_parameters,
                dist::GradientSynchronizer& grad_sync, dist::Communicator& communicator);

  double clip_grad_norm(double max_norm) override;
  // This rank's part of the squared gradient norm (its shards'), and their
  // scaling: clip_grad_norm() in two halves, for an update that clips these
  // parameters together with others (full_sharded_optimizer.h).
  double local_squared_norm() const;
  void scale_gradients(double scale);
  void step(double lr) override;
  checkpoint::NamedTensors state_tensors() const override;
  bool state_is_sharded() const override { return true; }
  void load_state_tensors(const checkpoint::NamedTensors& tensors) override;

 private:
  // The optimizer's per-element state kinds ("exp_avg", ...) under `optim`.
  std::vector<std::string> state_kinds() const;
  // The name ParameterOptimizer knows piece `piece` by.
  static std::string optimizer_key(size_t piece) { return "piece" + std::to_string(piece); }

  std::vector<std::pair<std::string, at::Tensor>> named_parameters_;
  dist::GradientSynchronizer& grad_sync_;
  dist::Communicator& communicator_;
  bool is_adamw_;
  bool has_momentum_;
  std::vector<at::Tensor> piece_weights_;  // views of the parameters; .grad views of the gradient shards
  std::unique_ptr<ParameterOptimizer> optimizer_;
  int64_t steps_taken_ = 0;  // the same on every rank: a skipped step skips everywhere
};

}  // namespace ptrain::train
