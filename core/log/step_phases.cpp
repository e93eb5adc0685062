#include "core/log/step_phases.h"

#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <deque>
#include <type_traits>
#include <utility>

namespace ptrain::log {
namespace {

std::atomic<StepPhaseTimer*> active_timer{nullptr};

// Device marks kept before the completed ones are folded into the sums (a
// non-blocking query), so a long log_every holds a bounded number of events.
constexpr size_t kFoldAfterMarks = 64;

// c10::Event::elapsedTime (LibTorch >= 2.3; every CUDA build of ptrain has it).
// Detected rather than versioned: the CPU builds' older LibTorch compiles
// the fallback, which no CPU run reaches.
template <class Event, class = void>
struct HasElapsedTime : std::false_type {};
template <class Event>
struct HasElapsedTime<Event, std::void_t<decltype(std::declval<const Event&>().elapsedTime(std::declval<const Event&>()))>>
    : std::true_type {};

template <class Event>
double elapsed_seconds(const Event& start, const Event& end) {
  if constexpr (HasElapsedTime<Event>::value) {
    return start.elapsedTime(end) / 1e3;  // milliseconds from start to end
  } else {
    TORCH_CHECK(false, "step phase timers: this LibTorch's c10::Event cannot time device work");
    return 0.0;
  }
}

// Waits until the device has reached `event` (c10::Event::synchronize, as new as elapsedTime).
template <class Event>
void wait_for(const Event& event) {
  if constexpr (HasElapsedTime<Event>::value) {
    event.synchronize();
  } else {
    TORCH_CHECK(false, "step phase timers: this LibTorch's c10::Event cannot time device work");
  }
}

}  // namespace

const char* step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::kOther:
      return "other";
    case StepPhase::kData:
      return "data";
    case StepPhase::kForward:
      return "forward";
    case StepPhase::kLossHead:
      return "loss_head";
    case StepPhase::kBackward:
      return "backward";
    case StepPhase::kCollectives:
      return "collectives";
    case StepPhase::kOptimizer:
      return "optimizer";
    case StepPhase::kEval:
      return "eval";
    case StepPhase::kCheckpoint:
      return "checkpoint";
  }
  return "other";
}

// One timing-enabled CUDA event per pending mark, in mark order; recorded on
// the device's current stream of the thread that marks.
struct StepPhaseTimer::DeviceEvents {
  std::deque<c10::Event> events;
  std::vector<c10::Event> spare;  // recorded before and folded: reused

  void record(c10::Device device) {
    if (spare.empty()) {
      events.emplace_back(device.type(), c10::EventFlag::BACKEND_DEFAULT);
    } else {
      events.push_back(std::move(spare.back()));
      spare.pop_back();
    }
    events.back().record(c10::impl::getDeviceGuardImpl(device.type())->getStream(device));
  }
  void drop_front() {
    spare.push_back(std::move(events.front()));
    events.pop_front();
  }
};

StepPhaseTimer::StepPhaseTimer(c10::Device device) : device_(device) {
  if (device_.is_cuda()) events_ = std::make_unique<DeviceEvents>();
}

StepPhaseTimer::~StepPhaseTimer() { deactivate(); }

void StepPhaseTimer::activate() {
  StepPhaseTimer* expected = nullptr;
  TORCH_CHECK(active_timer.compare_exchange_strong(expected, this) || expected == this,
              "step phase timers: another timer is active");
  const std::lock_guard<std::mutex> lock(mutex_);
  current_ = StepPhase::kOther;
  marks_.clear();
  if (events_) events_->events.clear();
  seconds_.fill(0.0);
  mark(StepPhase::kOther);
}

void StepPhaseTimer::deactivate() {
  StepPhaseTimer* expected = this;
  active_timer.compare_exchange_strong(expected, nullptr);
}

bool StepPhaseTimer::active() const { return active_timer.load() == this; }

StepPhase StepPhaseTimer::current() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

StepPhase current_step_phase() {
  const StepPhaseTimer* timer = active_timer.load();
  return timer == nullptr ? StepPhase::kOther : timer->current();
}

StepPhase StepPhaseTimer::enter(StepPhase phase) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const StepPhase previous = current_;
  const bool refines = phase != StepPhase::kLossHead || previous == StepPhase::kForward ||
                       previous == StepPhase::kBackward || previous == StepPhase::kLossHead;
  if (refines && phase != previous) mark(phase);
  return previous;
}

void StepPhaseTimer::mark(StepPhase phase) {
  const auto now = std::chrono::steady_clock::now();
  if (!events_) {
    // Host clock: the interval since the last mark is known at once.
    if (!marks_.empty()) {
      seconds_[static_cast<size_t>(marks_.back().phase)] +=
          std::chrono::duration<double>(now - marks_.back().host_time).count();
      marks_.clear();
    }
  } else {
    events_->record(device_);
    if (marks_.size() >= kFoldAfterMarks) fold(/*wait=*/false);
  }
  marks_.push_back({phase, now});
  current_ = phase;
}

// Adds the intervals between pending device marks to the sums, as far as the
// device has reached them (all of them with `wait`), keeping the last mark.
void StepPhaseTimer::fold(bool wait) {
  if (!events_) return;
  std::deque<c10::Event>& events = events_->events;
  if (wait && !events.empty()) wait_for(events.back());
  while (marks_.size() > 1 && (wait || events[1].query())) {
    seconds_[static_cast<size_t>(marks_.front().phase)] += elapsed_seconds(events[0], events[1]);
    marks_.erase(marks_.begin());
    events_->drop_front();
  }
}

PhaseSeconds StepPhaseTimer::resolve() {
  const std::lock_guard<std::mutex> lock(mutex_);
  mark(current_);  // closes the interval in force
  fold(/*wait=*/true);
  const PhaseSeconds seconds = seconds_;
  seconds_.fill(0.0);
  return seconds;
}

PhaseScope::PhaseScope(StepPhase phase) : timer_(active_timer.load()) {
  if (timer_ != nullptr) previous_ = timer_->enter(phase);
}

PhaseScope::~PhaseScope() {
  if (timer_ != nullptr && timer_->active()) timer_->enter(previous_);
}

}  // namespace ptrain::log
