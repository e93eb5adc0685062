// Reward functions written in Python, run in-process by an embedded CPython
// (pybind11 over Debian's libpython; -DPTRAIN_PYTHON_REWARDS=OFF leaves it out).
//
// A function is called once per scoring with the whole batch as keyword
// arguments of parallel lists (reward_batch.h: prompts, completions,
// completion_tokens, truncated and every dataset field, as TRL calls its
// reward_funcs), and returns one number per completion:
//
//   def exact(prompts, completions, answer, **kwargs):
//       return [float(c.strip() == a) for c, a in zip(completions, answer)]
//
// The interpreter starts on first use and lives as long as the process; the
// GIL is held only while Python code runs (import, call, conversion), so
// other threads never wait on it between calls.
#pragma once

#include "ptrain/sdk/rewards.h"

#include <memory>
#include <string>

namespace ptrain::rewards {

// Imports `file` (a .py path) once per process; its directory goes first on
// sys.path, so it may import its neighbours. The library offers the public
// callables the file defines, in their order, and creates each by name.
// Throws sdk::ConfigError naming the file: missing, not a .py file, raised
// while importing (with the traceback), no such function (listing those it
// defines), not callable; or, built without Python, naming
// PTRAIN_PYTHON_REWARDS. A function's score() throws sdk::PluginError naming
// the function and file: the traceback of an exception, a result that is not
// a list of numbers, the wrong number of scores, a non-finite one.
std::unique_ptr<sdk::RewardLibrary> open_python_reward_file(const std::string& file);

}  // namespace ptrain::rewards
