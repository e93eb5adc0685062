#include "core/app/generation_session.h"

#include "core/dist/c10d_communicator.h"
#include "core/dist/launch_env.h"
#include "core/log/logger.h"
#include "core/train/compute_device.h"
#include "core/train/cpu_kernels.h"

#include <chrono>

namespace ptrain::app {
namespace {

// Ranks meet once per round of prompts; a round of long completions on a
// slow CPU may take minutes.
constexpr std::chrono::seconds kCollectiveTimeout{1800};

// The runtime keys these options stand for, for the helpers training uses.
config::RunConfig runtime_config(const ModelOptions& options) {
  config::RunConfig config;
  config.source = "--cpu-kernels";
  config.runtime.device = options.cpu_only ? config::DeviceChoice::kCpu : config::DeviceChoice::kAuto;
  config.runtime.cpu_kernels = options.avx2_kernels ? config::CpuKernels::kAvx2 : config::CpuKernels::kNative;
  return config;
}

}  // namespace

GenerationSession open_generation_session(const ModelOptions& options) {
  const dist::LaunchEnv launch = dist::read_launch_env();
  log::init_logging(launch.rank);
  GenerationSession session;
  session.source = generation::resolve_model_source(options.model, options.base);
  const config::RunConfig config = runtime_config(options);
  train::pin_cpu_kernels(config);
  session.device = train::resolve_device(config, launch.local_rank, launch.local_world_size);
  session.communicator = dist::make_communicator(launch, kCollectiveTimeout, session.device);
  session.loaded = generation::load_model(session.source, session.device);
  log::info("generate", "model " + generation::describe(session.source) + ", " +
                            std::to_string(session.loaded.model->num_parameters()) + " parameters, on " +
                            session.device.str() + " (" + train::describe_cpu_kernels() + ")");
  return session;
}

}  // namespace ptrain::app
