// Counting the tensor-to-scalar reads of a step's microbatch loop. A read
// (aten::_local_scalar_dense: item(), a tensor used as a bool or a number)
// makes the host wait for the device's queued kernels, so on a GPU one per
// microbatch serialises the loop; the contract keeps the loop free of them
// (metric values stay tensors, docs/plugins.md "Metrics").
#pragma once

#include "ptrain/sdk/train_module.h"

#include <cstdint>
#include <memory>

namespace ptrain::testing {

// Counts reads on every thread between start() and stop() while it lives.
// One at a time per process (the observer is process-global).
class ScalarReadCounter {
 public:
  ScalarReadCounter();
  ~ScalarReadCounter();
  ScalarReadCounter(const ScalarReadCounter&) = delete;
  ScalarReadCounter& operator=(const ScalarReadCounter&) = delete;

  void start();
  void stop();
  int64_t reads() const;

 private:
  uint64_t handle_;
};

// A TrainModule that forwards every call to `inner` and counts reads from the
// start of the first microbatch_loss of a step to the end of its last: the
// core's loop (each microbatch's forward, backward and metric hand-off).
class LoopReadObserver final : public sdk::TrainModule {
 public:
  explicit LoopReadObserver(sdk::TrainModule& inner) : inner_(inner) {}

  int64_t microbatches() const { return microbatches_; }
  int64_t reads() const { return counter_.reads(); }

  void setup(sdk::Context& ctx) override { inner_.setup(ctx); }
  std::vector<sdk::MetricSpec> metric_specs() const override { return inner_.metric_specs(); }
  void check_example(const sdk::Example& example) const override { inner_.check_example(example); }
  void prepare_dataset(sdk::Context& ctx, const std::vector<sdk::Example>& examples) override {
    inner_.prepare_dataset(ctx, examples);
  }
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override;
  std::vector<sdk::LossTerm> loss_terms() const override { return inner_.loss_terms(); }
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override {
    return inner_.count_units(microbatch);
  }
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override;
  void end_step(sdk::Context& ctx) override { inner_.end_step(ctx); }
  sdk::PluginState save_state() const override { return inner_.save_state(); }
  void load_state(sdk::Context& ctx, const sdk::PluginState& state) override { inner_.load_state(ctx, state); }

 private:
  sdk::TrainModule& inner_;
  ScalarReadCounter counter_;
  int64_t microbatches_ = 0;  // prepare()'s count for this step
  int64_t calls_ = 0;
};

}  // namespace ptrain::testing
