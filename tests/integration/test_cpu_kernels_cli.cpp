// runtime.cpu_kernels through `ptrain train` (docs/reliability.md#the-same-run):
// "avx2" restarts ptrain with LibTorch, oneDNN and OpenBLAS capped at AVX2,
// which must log what a run gets with the same caps set by hand in its
// environment; "native" leaves the kernels to the CPU.
#include "catch.h"

#include "support/run_command.h"
#include "support/test_util.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ptrain::testing::CommandResult;
using ptrain::testing::run_command;

namespace {

const char* const kAvx2Environment = "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell";

// A 1-layer byte-level model trained 6 steps on the bundled arithmetic data on two threads.
fs::path write_config(const fs::path& dir, const std::string& name, const std::string& cpu_kernels) {
  const fs::path path = dir / (name + ".toml");
  std::ofstream(path) << "plugin = \"sft\"\nseed = 3\noutput_dir = \"" << (dir / name).string() << "\"\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 1\n"
                      << "num_heads = 2\nnum_kv_heads = 1\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << PTRAIN_SOURCE_DIR << "/data/arith/train.jsonl\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 16\nmicro_size = 8\n"
                      << "[optim]\nlr = 1e-3\n"
                      << "[train]\nmax_steps = 6\nlog_every = 1\n"
                      << "[runtime]\nthreads = 2\ncpu_kernels = \"" << cpu_kernels << "\"\n";
  return path;
}

// Each step's metrics without the timings, which differ from run to run.
std::vector<nlohmann::json> figures_of(const fs::path& run_dir) {
  std::vector<nlohmann::json> steps = ptrain::testing::read_metrics_jsonl(run_dir / "metrics.jsonl");
  for (nlohmann::json& step : steps) {
    for (auto it = step.begin(); it != step.end();) {
      const std::string& key = it.key();
      it = (key.size() > 2 && key.compare(key.size() - 2, 2, "_s") == 0) || key == "tokens_per_s" || key == "mfu"
               ? step.erase(it)
               : std::next(it);
    }
  }
  return steps;
}

bool cpu_has_avx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

TEST_CASE("runtime.cpu_kernels = \"avx2\" trains on the kernels the AVX2 caps give when set by hand",
          "[e2e][precision]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("cpu_kernels");
  const fs::path pinned = write_config(dir, "pinned", "avx2");
  const CommandResult by_config = run_command(std::string(PTRAIN_EXE) + " train -c " + pinned.string());
  INFO(by_config.output);
  if (!cpu_has_avx2()) {
    CHECK(by_config.exit_code == 2);
    CHECK_THAT(by_config.output, Catch::Contains(pinned.string()) && Catch::Contains("runtime.cpu_kernels") &&
                                     Catch::Contains("needs a CPU with AVX2"));
    return;
  }
  REQUIRE(by_config.exit_code == 0);
  CHECK_THAT(by_config.output, Catch::Contains("cpu (AVX2 kernels, pinned), fp32"));
  // The plugin's load is logged once: the restart comes before it.
  CHECK(by_config.output.find("[plugin] loaded") == by_config.output.rfind("[plugin] loaded"));

  const fs::path by_hand_config = write_config(dir, "by_hand", "native");
  const CommandResult by_hand =
      run_command(std::string("env ") + kAvx2Environment + " " + PTRAIN_EXE + " train -c " + by_hand_config.string());
  INFO(by_hand.output);
  REQUIRE(by_hand.exit_code == 0);
  CHECK_THAT(by_hand.output, Catch::Contains("cpu (AVX2 kernels, pinned), fp32"));
  const std::vector<nlohmann::json> pinned_steps = figures_of(dir / "pinned");
  REQUIRE(pinned_steps.size() == 6);
  CHECK(pinned_steps == figures_of(dir / "by_hand"));

  const fs::path native_config = write_config(dir, "native", "native");
  const CommandResult native = run_command("env -u ATEN_CPU_CAPABILITY -u ONEDNN_MAX_CPU_ISA -u OPENBLAS_CORETYPE " +
                                           std::string(PTRAIN_EXE) + " train -c " + native_config.string());
  INFO(native.output);
  REQUIRE(native.exit_code == 0);
  CHECK_THAT(native.output, Catch::Contains("cpu (native kernels: "));
}
