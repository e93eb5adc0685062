// DPO on the stand-in device (docs/devices.md), against the same run on the
// CPU: with a live reference model or a precomputed one, one forward of both
// sides or two, fp32 and bf16-mixed. The first of these is the configuration
// that stopped on an H200 ("Expected all tensors to be on the same device,
// but found at least two devices, cuda:0 and cpu!"): the live reference
// scored the pairs prepare() collated on the host.
#include "catch.h"

#include "device_test_support.h"
#include "support/test_util.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

// 32 pairs of the bundled preference data and a tiny model: 2 steps of 8 pairs.
fs::path write_config(const fs::path& dir) {
  const fs::path data = ptrain::testing::first_lines("data/arith_prefs/train.jsonl", dir / "prefs.jsonl", 32);
  const fs::path path = dir / "dpo.toml";
  std::ofstream(path) << "plugin = \"dpo\"\nseed = 3\n"
                      << "[model]\nvocab_size = 259\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 2\n"
                      << "num_heads = 4\nnum_kv_heads = 2\nmax_position_embeddings = 32\n"
                      << "[data]\ntrain = \"" << data.string() << "\"\nmax_length = 16\n"
                      << "[batch]\nglobal_size = 8\nmicro_size = 4\n"
                      << "[optim]\nlr = 2e-3\n"
                      << "[schedule]\nname = \"constant\"\nwarmup_steps = 1\n"
                      << "[train]\nmax_steps = 2\nlog_every = 1\n"
                      << "[module]\nloss = [\"sigmoid\", \"sft\"]\nloss_weights = [1, 0.1]\nbeta = 0.5\n";
  return path;
}

}  // namespace

TEST_CASE("DPO trains on the device as on the CPU, with a live or precomputed reference, concatenated or not",
          "[device][dpo][bf16]") {
  const fs::path dir = ptrain::testing::fresh_test_dir("device_dpo");
  const fs::path config = write_config(dir);
  struct Variant {
    bool precompute, concatenated, bf16;
  };
  // bf16-mixed rounds each product to bfloat16 on a device, never on the CPU
  // with oneDNN (docs/devices.md): the curves then agree to ~1e-3.
  for (const Variant variant : {Variant{false, true, true}, Variant{false, false, false}, Variant{true, true, false},
                                Variant{true, false, true}}) {
    const std::string name = std::string(variant.precompute ? "precomputed" : "live") + " reference, " +
                             (variant.concatenated ? "concatenated" : "separate") + ", " +
                             (variant.bf16 ? "bf16-mixed" : "fp32");
    DYNAMIC_SECTION(name) {
      const std::string extra = std::string("--set module.precompute_reference=") +
                                (variant.precompute ? "true" : "false") +
                                " --set module.concatenated=" + (variant.concatenated ? "true" : "false") +
                                " --set runtime.precision=\"" + (variant.bf16 ? "bf16-mixed" : "fp32") + "\"";
      const auto on_device = ptrain::testing::train_on_device(config, dir / "device", extra);
      const auto on_cpu = ptrain::testing::train_on_cpu(config, dir / "cpu", extra);
      const double tolerance = variant.bf16 ? 1e-2 : 1e-4;
      for (const char* key : {"loss", "rewards/margins", "logps/chosen", "grad_norm"}) {
        ptrain::testing::check_same_curve(on_device, on_cpu, key, tolerance);
      }
    }
  }
}
