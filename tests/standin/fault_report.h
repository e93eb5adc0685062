// A host access to stand-in device memory (device_arena.h) faults; this
// handler says so, with a backtrace, before the process dies of it as it
// would have anyway.
#pragma once

namespace ptrain::standin {

// Installs the SIGSEGV and SIGBUS handler, unless it is the one in place.
// Called when the library loads and again whenever a run resolves its device:
// a test framework may have put its own handlers in since (Catch2 does,
// around every test case); the previous ones still get every signal after ours.
void arm_fault_report();

}  // namespace ptrain::standin
