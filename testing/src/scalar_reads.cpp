#include "scalar_reads.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

namespace ptrain::testing {
namespace {

// RecordFunction takes plain function pointers, so the state is global.
std::atomic<bool> counter_alive{false};
std::atomic<bool> counting{false};
std::atomic<int64_t> read_count{0};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& op) {
  if (counting.load(std::memory_order_relaxed) && std::strcmp(op.name(), "aten::_local_scalar_dense") == 0) {
    read_count.fetch_add(1, std::memory_order_relaxed);
  }
  return nullptr;
}

}  // namespace

ScalarReadCounter::ScalarReadCounter() {
  if (counter_alive.exchange(true)) throw std::logic_error("ScalarReadCounter: one at a time per process");
  read_count = 0;
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(on_op_start).scopes({at::RecordScope::FUNCTION}));
}

ScalarReadCounter::~ScalarReadCounter() {
  counting = false;
  at::removeCallback(handle_);
  counter_alive = false;
}

void ScalarReadCounter::start() { counting = true; }
void ScalarReadCounter::stop() { counting = false; }
int64_t ScalarReadCounter::reads() const { return read_count.load(); }

std::vector<std::unique_ptr<sdk::Microbatch>> LoopReadObserver::prepare(sdk::Context& ctx,
                                                                        const std::vector<const sdk::Example*>& examples,
                                                                        const sdk::MicrobatchPlan& plan) {
  std::vector<std::unique_ptr<sdk::Microbatch>> microbatches = inner_.prepare(ctx, examples, plan);
  microbatches_ = static_cast<int64_t>(microbatches.size());
  calls_ = 0;
  return microbatches;
}

sdk::LossOut LoopReadObserver::microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) {
  if (calls_ == 0) counter_.start();
  sdk::LossOut out = inner_.microbatch_loss(ctx, microbatch);
  if (++calls_ == microbatches_) counter_.stop();
  return out;
}

}  // namespace ptrain::testing
