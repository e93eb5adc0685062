// Fault injection for the tests, armed from the environment and checked at
// the place where the fault it imitates would happen (never in the loop):
//
//   PTRAIN_TEST_NAN_AT=2:1            rank 1's step 2 gets a NaN loss and gradient,
//                                     as an overflow in its forward or backward would
//   PTRAIN_TEST_STOP_AT=3:1           rank 1 gets a stop request at step 3, as from SIGTERM
//   PTRAIN_TEST_KILL_AT=point[:N]     the process kills itself (SIGKILL) the N-th time
//                                     (default: the first) it reaches `point`, e.g.
//                                     before_rename while writing a checkpoint
//
// A step spec is "step[:rank][,step[:rank]...]": 1-based steps as logged, no
// rank: every rank. Unset variables cost one lookup per process.
#pragma once

#include <cstdint>

namespace ptrain::failpoint {

enum class StepFault {
  kNonfiniteGradient,  // PTRAIN_TEST_NAN_AT
  kStopRequest,        // PTRAIN_TEST_STOP_AT
};

// Whether `fault` is armed for this 1-based step on this rank.
bool armed(StepFault fault, int64_t step, int rank);

// Raises SIGKILL when PTRAIN_TEST_KILL_AT names `point` and this is the
// N-th time the process reaches it.
void kill_point(const char* point);

}  // namespace ptrain::failpoint
