// ptrain's side of the GPU-work audit (bench/gpu_audit.py, docs/performance.md):
// SFT update steps of a config's model and data, the way `ptrain train` runs
// them (accumulate_gradients, the step's reduction, clipping and the
// optimizer), with the model on the accelerator route of its kernels
// (core/model/kernel_route.h) — the ATen ops CUDA takes — on CPU tensors.
// After `warmup` steps, one step runs under LibTorch's profiler hook (a
// RecordFunction observer: what torch.profiler records, op by op) and every
// op it saw is written as JSON, in the fields gpu_audit.py reads from
// torch.profiler on the eager side:
//
//   {"events": [{"name", "thread", "start_ns", "end_ns", "shapes", "dtypes", "devices", "phase"}, ...],
//    "microbatches": N, "tokens": N, "torch": "2.11.0", "route": "accelerator"}
//
//   build-gpu/bin/bench_gpu_audit CONFIG OUT.json [warmup=1] [accelerator|cpu]
#include "core/config/config_loader.h"
#include "core/dist/communicator.h"
#include "core/dist/gradient_sync.h"
#include "core/log/step_phases.h"
#include "core/model/kernel_route.h"
#include "core/plugin/host_context.h"
#include "core/train/run_setup.h"
#include "core/train/step_reduction.h"
#include "core/train/update_step.h"
#include "core/train/weight_update.h"
#include "sft_config.h"
#include "sft_module.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace ptrain;

namespace {

struct OpEvent {
  std::string name;
  uint64_t thread = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  nlohmann::json shapes = nlohmann::json::array();   // per input: a tensor's sizes, [] for anything else
  nlohmann::json dtypes = nlohmann::json::array();   // per input: "float", "c10::BFloat16", ... as torch.profiler
  nlohmann::json devices = nlohmann::json::array();  // the Device arguments ("cpu" for a copy to the host)
  std::string phase;                                  // the step phase it ran in (core/log/step_phases.h)
};

// RecordFunction takes plain function pointers: the recording is global.
std::mutex events_mutex;
std::vector<OpEvent> events;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct EventIndex : at::ObserverContext {
  explicit EventIndex(size_t i) : index(i) {}
  size_t index;
};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& op) {
  OpEvent event;
  event.name = op.name();
  event.thread = op.threadId();
  for (const c10::IValue& input : op.inputs()) {
    if (input.isTensor() && input.toTensor().defined()) {
      const at::Tensor& tensor = input.toTensor();
      event.shapes.push_back(tensor.sizes().vec());
      event.dtypes.push_back(std::string(tensor.dtype().name()));
    } else {
      event.shapes.push_back(nlohmann::json::array());
      event.dtypes.push_back(input.isScalar() ? "Scalar" : "");
      if (input.isDevice()) event.devices.push_back(input.toDevice().str());
    }
  }
  event.phase = log::step_phase_name(log::current_step_phase());
  event.start_ns = now_ns();
  const std::lock_guard<std::mutex> lock(events_mutex);
  events.push_back(std::move(event));
  return std::make_unique<EventIndex>(events.size() - 1);
}

void on_op_end(const at::RecordFunction&, at::ObserverContext* context) {
  const int64_t end = now_ns();
  const std::lock_guard<std::mutex> lock(events_mutex);
  events.at(static_cast<EventIndex*>(context)->index).end_ns = end;
}

nlohmann::json to_json(const OpEvent& event) {
  return {{"name", event.name},     {"thread", event.thread}, {"start_ns", event.start_ns},
          {"end_ns", event.end_ns}, {"shapes", event.shapes}, {"dtypes", event.dtypes},
          {"devices", event.devices}, {"phase", event.phase}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CONFIG OUT.json [warmup=1] [accelerator|cpu]\n", argv[0]);
    return 2;
  }
  const std::string out_path = argv[2];
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 1;
  const std::string route = argc > 4 ? argv[4] : "accelerator";
  model::set_cpu_kernel_route(route == "cpu" ? model::CpuKernelRoute::kCpu : model::CpuKernelRoute::kAccelerator);

  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  const config::RunConfig run = config::ConfigDocument::load(argv[1], {}).resolve(schema);
  if (run.runtime.threads > 0) at::set_num_threads(static_cast<int>(run.runtime.threads));
  const sdk::MicrobatchPlan plan = train::microbatch_plan(run);

  // Built as `ptrain train` builds it (train::load_run_parts; the policy at
  // runtime.precision's dtype), with the SFT module compiled in.
  auto communicator = dist::make_single_process_communicator();
  train::RunParts parts = train::load_run_parts(run, train::compiled_module<sft::SftModule>(), at::kCPU, *communicator);
  parts.prepare_dataset({});
  const std::vector<sdk::Example>& examples = parts.examples;
  plugin::HostContext& context = *parts.context;
  sdk::TrainModule& module = *parts.module;
  const auto named = parts.policy->named_parameters();
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : named) parameters.push_back(parameter);

  dist::GradientSynchronizer grad_sync(parameters, *communicator, run.distributed.bucket_mb << 20);
  const std::unique_ptr<train::WeightUpdate> update = train::make_weight_update(run, named, grad_sync, *communicator);
  train::StepReduction reduction(module);

  int64_t microbatches = 0, tokens = 0;
  for (int step = 0; step <= warmup; ++step) {
    std::vector<const sdk::Example*> batch;
    for (int64_t i = 0; i < run.batch.global_size; ++i) {
      batch.push_back(&examples.at((step * run.batch.global_size + i) % static_cast<int64_t>(examples.size())));
    }
    const bool profiled = step == warmup;
    uint64_t handle = 0;
    // The step's phases, as `ptrain train` marks them: each op is tagged with its own.
    log::StepPhaseTimer phases(at::kCPU);
    if (profiled) {
      phases.activate();
      handle = at::addGlobalCallback(at::RecordFunctionCallback(on_op_start, on_op_end)
                                         .needsInputs(true)
                                         .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    }
    context.set_step(step, 0);
    const train::GradientResult gradient =
        train::accumulate_gradients({module, "sft", context, parameters, *communicator, grad_sync}, batch, plan,
                                    reduction.reducer());
    const double grad_norm = update->clip_grad_norm(run.optim.clip_grad_norm);
    const train::StepTotals totals = reduction.reduce(*communicator, gradient, grad_norm, false);
    update->step(run.optim.lr);
    if (profiled) {
      at::removeCallback(handle);
      phases.deactivate();
      microbatches = gradient.num_microbatches;
      tokens = totals.tokens;
    }
  }

  nlohmann::json out;
  out["events"] = nlohmann::json::array();
  for (const OpEvent& event : events) out["events"].push_back(to_json(event));
  out["microbatches"] = microbatches;
  out["tokens"] = tokens;
  out["route"] = route;
  out["torch"] = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                 std::to_string(TORCH_VERSION_PATCH);
  out["threads"] = at::get_num_threads();
  std::ofstream(out_path) << out.dump() << "\n";
  std::printf("{\"events\": %zu, \"microbatches\": %lld, \"tokens\": %lld}\n", events.size(),
              static_cast<long long>(microbatches), static_cast<long long>(tokens));
  return 0;
}
