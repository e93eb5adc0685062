// Fault injection for the tests, read from the environment, following
// PTRAIN_TEST_KILL_AT (core/checkpoint/atomic_dir.h):
//
//   PTRAIN_TEST_NAN_AT=2:1    rank 1 sees a NaN loss and gradient at step 2,
//                             as an overflow in its forward or backward would
//   PTRAIN_TEST_STOP_AT=3:1   rank 1 gets a stop request (as from SIGTERM) at step 3
//
// Each is "step[:rank][,step[:rank]...]": 1-based steps as logged, no rank:
// every rank.
#pragma once

#include <cstdint>

namespace ptrain::train {

bool test_hook_at(const char* variable, int64_t step, int rank);

}  // namespace ptrain::train
