// Where an update step's time goes, phase by phase (docs/monitoring.md):
// data, forward, loss head, backward, collectives, optimizer, eval,
// checkpoint, and "other" for the rest (metric reduction, logging).
//
// The code marks a phase for a scope (PhaseScope). The active timer gives
// the time between two consecutive marks to the phase in force between them,
// so phases nest (the loss head inside a forward and a backward, collectives
// inside the update step) and add up to the wall time they cover.
//
// On a GPU a mark is a CUDA event recorded on the device's current stream:
// a phase gets the device's time between its marks, and nothing waits for
// the device until resolve(), which the step recorder calls at log steps only
// (one wait per log line, none per phase or microbatch). On the CPU a mark
// reads the host's steady clock. Either costs about a microsecond per mark,
// a few dozen marks per step.
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace ptrain::log {

enum class StepPhase { kData, kForward, kLossHead, kBackward, kCollectives, kOptimizer, kEval, kCheckpoint, kOther };
inline constexpr size_t kStepPhaseCount = 9;

// "data", "forward", "loss_head", "backward", "collectives", "optimizer",
// "eval", "checkpoint", "other": the `time/<name>_s` metric keys.
const char* step_phase_name(StepPhase phase);

using PhaseSeconds = std::array<double, kStepPhaseCount>;  // indexed by StepPhase

class StepPhaseTimer {
 public:
  // Marks with CUDA events on a CUDA device, with the host clock elsewhere.
  explicit StepPhaseTimer(c10::Device device);
  ~StepPhaseTimer();
  StepPhaseTimer(const StepPhaseTimer&) = delete;
  StepPhaseTimer& operator=(const StepPhaseTimer&) = delete;

  // Makes this the process's active timer (PhaseScope marks it), starting
  // in kOther; deactivate() (or the destructor) ends that. One at a time.
  void activate();
  void deactivate();
  bool active() const;
  StepPhase current() const;

  // Switches to `phase` and returns the phase in force before. kLossHead
  // refines kForward and kBackward only: entered from any other phase (a
  // reference model's forward while data is prepared, an evaluation), it
  // leaves that phase in force.
  StepPhase enter(StepPhase phase);

  // Seconds spent in each phase since activate() or the last resolve(),
  // which starts the next interval. Waits for the device's last mark.
  PhaseSeconds resolve();

 private:
  struct Mark {
    StepPhase phase;  // in force from this mark to the next
    std::chrono::steady_clock::time_point host_time;
  };
  struct DeviceEvents;  // the marks' CUDA events, when on a GPU

  // Both with mutex_ held.
  void mark(StepPhase phase);
  void fold(bool wait);

  c10::Device device_;
  std::unique_ptr<DeviceEvents> events_;
  mutable std::mutex mutex_;  // marks come from the autograd engine's device threads too
  std::vector<Mark> marks_;   // not yet added to seconds_: the last one, or every pending device mark
  PhaseSeconds seconds_{};
  StepPhase current_ = StepPhase::kOther;
};

// The active timer's phase now; kOther when no timer is active (the GPU-work
// audit, bench/gpu_audit.py, tags each op with it).
StepPhase current_step_phase();

// The active timer's phase is `phase` while this lives (nothing when no
// timer is active).
class PhaseScope {
 public:
  explicit PhaseScope(StepPhase phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  StepPhaseTimer* timer_;
  StepPhase previous_ = StepPhase::kOther;
};

}  // namespace ptrain::log
