// The step-phase timers (core/log/step_phases.h) on the host clock: nested
// phases get the time between their marks, the phases add up to the wall
// time between activate() and resolve(), the loss head refines only a
// forward or a backward, and nothing is timed without an active timer.
#include "catch.h"

#include "core/log/step_phases.h"

#include <chrono>
#include <thread>

using ptrain::log::PhaseScope;
using ptrain::log::StepPhase;
using ptrain::log::StepPhaseTimer;

namespace {

using Clock = std::chrono::steady_clock;

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double phase_s(const ptrain::log::PhaseSeconds& seconds, StepPhase phase) {
  return seconds[static_cast<size_t>(phase)];
}

}  // namespace

TEST_CASE("step phases: nested scopes get the time between their marks, which adds up to the wall time",
          "[monitoring][phases]") {
  StepPhaseTimer timer(at::kCPU);
  const auto start = Clock::now();
  timer.activate();
  {
    const PhaseScope data(StepPhase::kData);
    sleep_ms(30);
  }
  {
    const PhaseScope forward(StepPhase::kForward);
    sleep_ms(20);
    {
      const PhaseScope head(StepPhase::kLossHead);
      sleep_ms(25);
    }
    const PhaseScope backward(StepPhase::kBackward);
    sleep_ms(20);
    const PhaseScope head(StepPhase::kLossHead);
    sleep_ms(15);
  }
  {
    const PhaseScope optimizer(StepPhase::kOptimizer);
    sleep_ms(10);
  }
  const ptrain::log::PhaseSeconds seconds = timer.resolve();
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();

  // Lower bounds only: a loaded machine may stretch any of them.
  CHECK(phase_s(seconds, StepPhase::kData) >= 0.030);
  CHECK(phase_s(seconds, StepPhase::kForward) >= 0.020);
  CHECK(phase_s(seconds, StepPhase::kLossHead) >= 0.040);
  CHECK(phase_s(seconds, StepPhase::kBackward) >= 0.020);
  CHECK(phase_s(seconds, StepPhase::kOptimizer) >= 0.010);
  CHECK(phase_s(seconds, StepPhase::kEval) == 0.0);
  double total = 0.0;
  for (const double s : seconds) total += s;
  CHECK(total >= 0.120);
  CHECK(total <= wall_s);

  // resolve() starts the next interval.
  sleep_ms(5);
  const ptrain::log::PhaseSeconds next = timer.resolve();
  CHECK(phase_s(next, StepPhase::kData) == 0.0);
  CHECK(phase_s(next, StepPhase::kOther) >= 0.005);
}

TEST_CASE("step phases: the loss head refines a forward or a backward only", "[monitoring][phases]") {
  StepPhaseTimer timer(at::kCPU);
  timer.activate();
  CHECK(timer.enter(StepPhase::kEval) == StepPhase::kOther);
  CHECK(timer.enter(StepPhase::kLossHead) == StepPhase::kEval);  // an evaluation's loss head stays eval
  CHECK(timer.enter(StepPhase::kForward) == StepPhase::kEval);
  CHECK(timer.enter(StepPhase::kLossHead) == StepPhase::kForward);
  CHECK(timer.enter(StepPhase::kBackward) == StepPhase::kLossHead);
  CHECK(timer.enter(StepPhase::kLossHead) == StepPhase::kBackward);
  CHECK(timer.enter(StepPhase::kData) == StepPhase::kLossHead);
  CHECK(timer.enter(StepPhase::kLossHead) == StepPhase::kData);  // a reference model's loss head stays data
  CHECK(timer.enter(StepPhase::kOther) == StepPhase::kData);
}

TEST_CASE("step phases: no active timer, no timing, and one active timer at a time", "[monitoring][phases]") {
  StepPhaseTimer timer(at::kCPU);
  {
    const PhaseScope ignored(StepPhase::kForward);  // no timer active: nothing happens
  }
  timer.activate();
  CHECK(timer.active());
  StepPhaseTimer other(at::kCPU);
  CHECK_THROWS_WITH(other.activate(), Catch::Contains("another timer is active"));
  {
    const PhaseScope forward(StepPhase::kForward);
    timer.deactivate();  // a scope that outlives its timer's activity changes nothing on exit
  }
  CHECK_FALSE(timer.active());
  other.activate();
  CHECK(other.active());
  CHECK(ptrain::log::step_phase_name(StepPhase::kLossHead) == std::string("loss_head"));
  CHECK(ptrain::log::step_phase_name(StepPhase::kCollectives) == std::string("collectives"));
}
