// What the tests of tests/device/ share: the stand-in device they run on
// (docs/devices.md) and runs of `ptrain` on it and on the CPU.
#pragma once

#include "support/run_command.h"

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ptrain::testing {

// The stand-in device. ctest names its library in PTRAIN_TEST_DEVICE; run by
// hand, the executable sets it to the one this build made. Child `ptrain`
// processes inherit it, so runtime.device = "auto" computes there too.
at::Device stand_in();

// `ptrain train -c <config> <extra>` on the stand-in device (runtime.device
// "auto") or on the CPU ("cpu"), into `output_dir`, replacing a run there
// unless `extra` resumes it; fails the test case with the output when it does
// not exit 0. Returns the run's metrics.jsonl lines.
std::vector<nlohmann::json> train_on_device(const std::filesystem::path& config,
                                            const std::filesystem::path& output_dir, const std::string& extra = "");
std::vector<nlohmann::json> train_on_cpu(const std::filesystem::path& config, const std::filesystem::path& output_dir,
                                         const std::string& extra = "");

// Writes the first `count` lines of the bundled data file `data_file`
// (relative to the checkout, e.g. "data/arith/train.jsonl") to `target`; returns `target`.
std::filesystem::path first_lines(const std::string& data_file, const std::filesystem::path& target, int count);

// Checks every step's `key` agrees between two runs to `relative` tolerance (and as
// much absolute, for values near 0).
void check_same_curve(const std::vector<nlohmann::json>& actual, const std::vector<nlohmann::json>& expected,
                      const std::string& key, double relative);

}  // namespace ptrain::testing
