#include "core/train/trainer.h"

#include "core/checkpoint/checkpoint.h"
#include "core/data/global_batch_sampler.h"
#include "core/log/logger.h"
#include "core/log/progress.h"
#include "core/metrics/metric_reducer.h"
#include "core/metrics/step_log.h"
#include "core/metrics/throughput.h"
#include "core/model/gemm.h"
#include "core/plugin/host_context.h"
#include "core/train/lr_schedule.h"
#include "core/train/numeric_guard.h"
#include "core/train/optimizer.h"
#include "core/train/resume.h"
#include "core/train/run_setup.h"
#include "core/train/test_hooks.h"
#include "core/train/update_step.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard: <ATen/ATen.h> no longer includes it in LibTorch 2.6

#include <signal.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool holds_a_run(const fs::path& dir) {
  std::error_code error;
  return fs::exists(dir, error) && !(fs::is_directory(dir, error) && fs::is_empty(dir, error));
}

// Refuses to mix a new run into an old one unless asked to replace or resume
// it. Checked before anything is loaded, acted on only once all of it loaded.
void check_output_dir(const fs::path& dir, bool overwrite, bool resuming) {
  if (holds_a_run(dir) && !overwrite && !resuming) {
    throw sdk::ConfigError("output_dir '" + dir.string() +
                           "' already holds a run; pass --resume auto to continue it, --overwrite to replace it, "
                           "or choose another output_dir");
  }
}

void prepare_output_dir(const fs::path& dir, bool overwrite, bool resuming) {
  if (!resuming && overwrite && holds_a_run(dir)) fs::remove_all(dir);
  fs::create_directories(dir);
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw sdk::Error(path.string() + ": cannot write");
}

// SIGTERM (Slurm preemption, `ptrain launch` stopping) and SIGUSR1 ask for a
// checkpoint and a clean exit at the end of the current step.
volatile sig_atomic_t g_stop_requested = 0;
void request_stop(int) { g_stop_requested = 1; }

class StopSignals {
 public:
  StopSignals() {
    struct sigaction action {};
    action.sa_handler = request_stop;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, &previous_term_);
    ::sigaction(SIGUSR1, &action, &previous_usr1_);
  }
  ~StopSignals() {
    ::sigaction(SIGTERM, &previous_term_, nullptr);
    ::sigaction(SIGUSR1, &previous_usr1_, nullptr);
  }

 private:
  struct sigaction previous_term_ {};
  struct sigaction previous_usr1_ {};
};

std::string new_run_id() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

int default_thread_count(int local_world_size) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1, static_cast<int>(cores) / std::max(1, local_world_size));
}

// Every rank starts from rank 0's weights, whatever its own init or load did.
void broadcast_parameters(const std::vector<at::Tensor>& parameters, dist::Communicator& communicator) {
  if (communicator.world_size() == 1) return;
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor& parameter : parameters) flat_parts.push_back(parameter.detach().reshape({-1}));
  std::vector<at::Tensor> flat{at::cat(flat_parts)};
  communicator.broadcast(flat, 0);
  int64_t offset = 0;
  at::NoGradGuard no_grad;
  for (const at::Tensor& parameter : parameters) {
    parameter.copy_(flat[0].narrow(0, offset, parameter.numel()).view_as(parameter));
    offset += parameter.numel();
  }
}

// The step's metrics plus the stop request, which travels with them so that
// every rank stops after the same step without a collective of its own.
std::vector<sdk::MetricSpec> trainer_metric_specs(const sdk::TrainModule& module) {
  std::vector<sdk::MetricSpec> specs = step_metric_specs(module);
  specs.push_back({"core/stop_requested", sdk::Reduction::kMax});
  specs.push_back(nonfinite_metric_spec());
  return specs;
}

}  // namespace

TrainSummary run_training(const config::RunConfig& config, const plugin::LoadedPlugin& plugin,
                          dist::Communicator& communicator, const TrainOptions& options) {
  const bool is_main = communicator.rank() == 0;
  const fs::path output_dir = config.output_dir;
  const fs::path checkpoints_dir = output_dir / "checkpoints";
  const std::optional<fs::path> resume_from =
      options.resume.empty() ? std::nullopt : checkpoint::find_resume_checkpoint(options.resume, output_dir);
  check_output_dir(output_dir, options.overwrite, !options.resume.empty());

  const int threads = config.runtime.threads > 0 ? static_cast<int>(config.runtime.threads)
                                                 : default_thread_count(communicator.local_world_size());
  at::set_num_threads(threads);

  const auto tokenizer = make_tokenizer(config.tokenizer);
  const auto policy = make_policy(config, *tokenizer);
  plugin::ModuleHandle module = plugin.create_module();
  plugin::HostContext context(*policy, *tokenizer, config.module, communicator,
                              sdk::RunInfo{config.seed, config.data.max_length, 0, 0, config.output_dir});
  module->setup(context);

  const std::vector<sdk::Example> examples = load_examples(config, *module);

  // Everything the run needs has loaded: only now is the run directory
  // created or replaced, so a failed validation leaves it as it was.
  if (is_main) prepare_output_dir(output_dir, options.overwrite, !options.resume.empty());
  communicator.barrier();
  log::add_log_file(output_dir, communicator.rank());
  if (is_main) write_text_file(output_dir / "config.toml", options.resolved_config_toml);
  module->prepare_dataset(context, examples);
  const data::GlobalBatchSampler sampler(static_cast<int64_t>(examples.size()), config.batch.global_size, config.seed);
  const sdk::MicrobatchPlan plan = microbatch_plan(config);
  metrics::MetricReducer reducer(trainer_metric_specs(*module));

  const auto named_parameters = policy->named_parameters();
  std::vector<at::Tensor> parameters;
  for (const auto& [name, parameter] : named_parameters) parameters.push_back(parameter);
  ParameterOptimizer optimizer(config.optim, named_parameters);

  // A resumed run continues from the checkpoint's weights, optimizer state,
  // plugin state and step; the data order follows from the step alone.
  checkpoint::TrainerState trainer_state{0, 0, communicator.world_size(), plugin.info().name, new_run_id()};
  if (resume_from) {
    const checkpoint::LoadedCheckpoint loaded = checkpoint::read_checkpoint(*resume_from);
    restore_policy(loaded, plugin.info().name, options.resolved_config_toml, *policy);
    optimizer.load_state_tensors(loaded.optimizer_state);
    module->load_state(context, loaded.plugin_state);
    trainer_state = loaded.trainer;
    trainer_state.world_size = communicator.world_size();
    log::info("resume", "continuing from " + resume_from->string() + " after step " +
                            std::to_string(trainer_state.completed_steps) + " (saved at world size " +
                            std::to_string(loaded.trainer.world_size) + ")");
  } else if (!options.resume.empty()) {
    log::info("resume", "no checkpoint under " + checkpoints_dir.string() + "; starting from step 0");
  }
  broadcast_parameters(parameters, communicator);
  dist::GradientSynchronizer grad_sync(parameters, communicator, config.distributed.bucket_mb << 20);

  const int64_t num_parameters = policy->num_parameters();
  const double peak_flops_per_s = metrics::measure_matmul_flops_per_s();
  log::info("train", "plugin " + std::string(plugin.info().name) + " " + plugin.info().version + ", " +
                         std::to_string(num_parameters) + " parameters, " + std::to_string(examples.size()) +
                         " examples, " + std::to_string(sampler.steps_per_epoch()) + " steps per epoch, " +
                         std::to_string(threads) + " threads, world size " + std::to_string(communicator.world_size()) +
                         ", matmul " + model::gemm_backend());

  std::unique_ptr<metrics::StepLog> step_log;
  if (is_main) {
    truncate_metrics(output_dir / "metrics.jsonl", trainer_state.completed_steps);
    step_log = std::make_unique<metrics::StepLog>(
        metrics::StepLogOptions{output_dir, config.logging.tensorboard, options.resolved_config_toml,
                                trainer_state.completed_steps, config.train.max_steps, config.train.log_every});
  }

  const auto save_checkpoint = [&] {
    if (is_main) {
      checkpoint::CheckpointData data{policy.get(), optimizer.state_tensors(), module->save_state(), trainer_state,
                                      options.resolved_config_toml};
      const fs::path saved = checkpoint::write_checkpoint(checkpoints_dir, data, config.checkpoint.keep_last);
      log::info("checkpoint", "saved " + saved.string());
    }
    communicator.barrier();
  };

  NumericGuard numeric_guard(config.train.max_consecutive_skips, config.train.loss_spike_factor);
  const StopSignals stop_signals;
  TrainSummary summary;
  summary.skipped_steps = trainer_state.skipped_steps;
  const auto run_start = Clock::now();
  const int64_t max_steps = config.train.max_steps;
  const int64_t first_step = trainer_state.completed_steps;
  bool saved_this_step = false;
  for (int64_t step = first_step; step < max_steps; ++step) {
    const auto step_start = Clock::now();
    const double collective_s_before = communicator.collective_seconds();
    const data::GlobalBatchSampler::Position position = sampler.position(step);
    context.set_step(step, position.epoch);

    std::vector<const sdk::Example*> rank_examples;
    for (const int64_t index :
         data::rank_example_indices(sampler, step, communicator.rank(), communicator.world_size())) {
      rank_examples.push_back(&examples[index]);
    }

    GradientResult gradient =
        accumulate_gradients({*module, plugin.info().name, context, parameters, communicator, grad_sync}, rank_examples,
                             plan, reducer);
    double grad_norm = 0.0;
    if (gradient.has_units) {
      if (test_hook_at("PTRAIN_TEST_NAN_AT", step + 1, communicator.rank())) {
        gradient.local_loss = std::nan("");
        parameters.front().mutable_grad().view({-1})[0] = std::nan("");
      }
      grad_norm = clip_grad_norm(parameters, config.optim.clip_grad_norm);
    }
    // The stop request and the fault flag travel with the metrics, so every
    // rank stops, or skips the update, at the same step.
    if (test_hook_at("PTRAIN_TEST_STOP_AT", step + 1, communicator.rank())) g_stop_requested = 1;
    reducer.add("core/stop_requested", g_stop_requested ? 1.0 : 0.0);
    reducer.add(kNonfiniteMetric, local_fault(gradient.local_loss, grad_norm));
    std::map<std::string, double> reduced = reducer.reduce(communicator);

    // Skipped steps do not advance the schedule: it counts applied updates.
    const double lr = learning_rate_at(config.schedule, config.optim.lr, step - summary.skipped_steps, max_steps);
    std::map<std::string, double> values;
    bool stepped = false;
    if (!gradient.has_units) {
      log::warn("train", "step " + std::to_string(step + 1) +
                             ": no loss unit in the global batch (nothing to learn from); step skipped");
    } else {
      const double loss = reduced["core/loss"];
      values["loss"] = loss;
      values["grad_norm"] = grad_norm;
      const NumericGuard::Verdict verdict = numeric_guard.on_step(step + 1, reduced[kNonfiniteMetric] > 0.0, loss);
      if (!verdict.skip) {
        optimizer.step(lr);
        stepped = true;
      } else {
        log::warn("train", "step " + std::to_string(step + 1) +
                               ": non-finite loss or gradient norm on some rank; update skipped on every rank");
      }
      if (verdict.spike) {
        log::warn("train", "step " + std::to_string(step + 1) + ": loss spike: " + std::to_string(loss) +
                               " is at least train.loss_spike_factor times every earlier loss");
      }
    }
    module->end_step(context);
    if (!stepped) ++summary.skipped_steps;
    ++summary.steps;
    trainer_state.completed_steps = step + 1;
    trainer_state.skipped_steps = summary.skipped_steps;

    const double step_s = seconds_since(step_start);
    const auto tokens = static_cast<int64_t>(reduced["core/tokens"]);
    values["lr"] = lr;
    values["units"] = static_cast<double>(gradient.global_units.empty() ? 0 : gradient.global_units.front());
    values["tokens"] = static_cast<double>(tokens);
    values["padded_tokens"] = reduced["core/padded_tokens"];
    values["step_s"] = step_s;
    values["comm_s"] = communicator.collective_seconds() - collective_s_before;
    values["tokens_per_s"] = static_cast<double>(tokens) / step_s;
    values["mfu"] = metrics::training_flops(num_parameters, tokens) / step_s /
                    (peak_flops_per_s * communicator.world_size());
    values["skipped_steps"] = static_cast<double>(summary.skipped_steps);
    values["nonfinite_steps"] = static_cast<double>(numeric_guard.faults());
    values["loss_spikes"] = static_cast<double>(numeric_guard.spikes());
    values["epoch"] = static_cast<double>(position.epoch);
    for (const auto& [name, value] : reduced) {
      if (name.rfind("core/", 0) != 0) values[name] = value;
    }

    if (is_main) step_log->record(step + 1, values);
    saved_this_step = false;
    if (config.checkpoint.every_steps > 0 && (step + 1) % config.checkpoint.every_steps == 0) {
      save_checkpoint();
      saved_this_step = true;
    }
    if (reduced["core/stop_requested"] > 0.0) {
      if (!saved_this_step) save_checkpoint();
      log::info("train", "stopped on request after step " + std::to_string(step + 1) + "; continue with --resume auto");
      summary.stopped = true;
      return summary;
    }
  }

  step_log.reset();  // the progress bar goes; the closing lines below stay
  // The end of the run is a checkpoint too, so a longer max_steps can continue it.
  if (!saved_this_step && summary.steps > 0) save_checkpoint();
  summary.final_model_dir = output_dir / "final";
  if (is_main) {
    checkpoint::save_model_atomically(*policy, summary.final_model_dir);
    log::info("train", "done: " + std::to_string(summary.steps) + " steps (" + std::to_string(summary.skipped_steps) +
                           " skipped in all) in " + log::format_duration(seconds_since(run_start)) +
                           "; final model in " + summary.final_model_dir.string());
  }
  communicator.barrier();
  return summary;
}

}  // namespace ptrain::train
