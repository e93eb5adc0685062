// Helpers of the multi-process tests: launching tests/dist/dist_worker.cpp
// under `ptrain launch`, reading its RESULT lines and its ranks' pids.
#pragma once

#include "catch.h"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::dist_test {

// Sets environment variables (a launcher's) for the lifetime of the object and clears them after.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> values) : values_(std::move(values)) {
    for (const auto& [name, value] : values_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : values_) ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

inline std::string launch_worker(int nproc, const std::string& arguments) {
  return "launch --nproc " + std::to_string(nproc) + " -- " + PTRAIN_DIST_WORKER + " " + arguments;
}

// The JSON after "RESULT " on each rank's output line.
inline std::map<int, nlohmann::json> results_by_rank(const std::string& output) {
  std::map<int, nlohmann::json> results;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("RESULT {");
    if (at == std::string::npos) continue;
    const nlohmann::json result = nlohmann::json::parse(line.substr(at + 7));
    results[result["rank"].get<int>()] = result;
  }
  return results;
}

inline bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0; }

inline std::vector<pid_t> read_pids(const std::filesystem::path& dir) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    pid_t pid = 0;
    std::ifstream(entry.path()) >> pid;
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

// `dist_worker metrics` on `world` ranks: rank r adds accuracy 1/(r+1) over
// 10^r tokens in r+1 microbatches; every rank must hold the global values.
inline void check_global_metrics(const std::map<int, nlohmann::json>& by_rank, int world) {
  REQUIRE(static_cast<int>(by_rank.size()) == world);
  double weighted = 0.0, weights = 0.0, microbatches = 0.0, mean_sum = 0.0;
  for (int r = 0; r < world; ++r) {
    weighted += (1.0 / (r + 1)) * std::pow(10.0, r);
    weights += std::pow(10.0, r);
    microbatches += r + 1;
    mean_sum += static_cast<double>(r) * (r + 1);
  }
  for (const auto& [rank, values] : by_rank) {
    INFO("rank " << rank);
    CHECK(values["accuracy"].get<double>() == Approx(weighted / weights).epsilon(1e-12));
    CHECK(values["tokens"].get<double>() == Approx(weights).epsilon(1e-12));
    CHECK(values["worst"].get<double>() == 10.0 * (world - 1) + (world - 1));
    CHECK(values["best"].get<double>() == -10.0 * (world - 1) - (world - 1));
    CHECK(values["per_microbatch"].get<double>() == Approx(mean_sum / microbatches));
  }
}

}  // namespace ptrain::dist_test
