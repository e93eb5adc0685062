#include "core/train/trainer.h"

#include "core/log/logger.h"
#include "core/log/progress.h"
#include "core/train/best_model.h"
#include "core/train/checkpointer.h"
#include "core/train/evaluator.h"
#include "core/train/lr_schedule.h"
#include "core/train/model_export.h"
#include "core/train/numeric_guard.h"
#include "core/train/step_recorder.h"
#include "core/train/step_reduction.h"
#include "core/train/training_run.h"
#include "core/train/update_step.h"

namespace ptrain::train {
namespace fs = std::filesystem;

namespace {

// The policy as a model directory; every rank calls it. Rank 0 writes it,
// or under sharding "full" every rank writes its share of the weights.
void save_policy(TrainingRun& run, const fs::path& dir) {
  if (run.sharded_layers) {
    export_sharded_model(run.config, *run.parts.policy, *run.sharded_layers, run.communicator, run.model_files, dir);
  } else if (run.communicator.rank() == 0) {
    export_model(run.config, *run.parts.policy, run.model_files, dir);
  }
}

// The end of the run (after max_steps, or stopped early): a checkpoint (so
// a longer max_steps can continue it) unless the last step saved one, and
// final/ as a model directory.
TrainSummary finish(TrainingRun& run, Checkpointer& checkpointer, StepRecorder& recorder,
                    const std::string& stop_reason) {
  recorder.close();
  run.directory->confirm_start();  // also when no step was left to run
  log_state_memory(run);
  checkpointer.at_end(run.state.completed_steps);
  TrainSummary summary{run.state.completed_steps - run.first_step, run.state.skipped_steps,
                       fs::path(run.config.output_dir) / "final", false, stop_reason};
  save_policy(run, summary.final_model_dir);
  if (run.communicator.rank() == 0) {
    const std::string why = stop_reason.empty() ? "" : " (" + stop_reason + ")";
    log::info("train", "done: " + std::to_string(summary.steps) + " steps (" + std::to_string(summary.skipped_steps) +
                           " skipped in all) in " + log::format_duration(recorder.run_seconds()) + why +
                           "; final model in " + summary.final_model_dir.string());
  }
  run.communicator.barrier();
  return summary;
}

TrainSummary stopped(const TrainingRun& run) {
  log::info("train", "stopped on request after step " + std::to_string(run.state.completed_steps) +
                         "; continue with --resume auto");
  return {run.state.completed_steps - run.first_step, run.state.skipped_steps, {}, true, "stopped on request"};
}

}  // namespace

TrainSummary run_training(const config::RunConfig& config, const plugin::LoadedPlugin& plugin,
                          dist::Communicator& launch_communicator, const TrainOptions& options,
                          const StopSignals& stop_signals) {
  const std::unique_ptr<TrainingRun> built = build_training_run(config, plugin, launch_communicator, options);
  TrainingRun* const run = built.get();
  dist::Communicator& communicator = run->communicator;  // the run's collectives go through it (training_run.h)
  StepReduction reduction(run->module());
  const bool resumed = run->first_step > 0;
  NumericGuard guard(config.train.max_consecutive_skips, config.train.loss_spike_factor);
  if (resumed) guard.restore(run->state.numeric_guard, run->state.source);
  BestModel best(config, communicator, [run](const fs::path& dir) { save_policy(*run, dir); },
                 resumed ? &run->state.best_model : nullptr);
  // A checkpoint holds the state of the step just completed, the core's
  // components' included.
  const auto snapshot = [run, &guard, &best] {
    checkpoint::CheckpointData data = run->snapshot();
    data.trainer.numeric_guard = guard.state();
    data.trainer.best_model = best.state();
    return data;
  };
  Checkpointer checkpointer(config.checkpoint, fs::path(config.output_dir) / "checkpoints", communicator, snapshot,
                            run->first_step, run->module().checkpoint_multiple(), run->sharded_layers.get());
  Evaluator evaluator(run->eval_parts(), config.eval.every_steps);
  StepRecorder recorder(*run);
  bool stopping = false;  // a stop was requested on some rank: the run ends at its next checkpoint

  for (int64_t step = run->first_step; step < config.train.max_steps; ++step) {
    recorder.start_step();
    const int64_t epoch = run->sampler.position(step).epoch;
    run->context().set_step(step, epoch);
    const sdk::GlobalBatch global_batch = run->global_batch(step);
    run->context().set_global_batch(global_batch);
    const GradientResult gradient =
        accumulate_gradients(run->step_parts(), rank_share(global_batch), run->plan, reduction.reducer());
    const plugin::HostContext::ForwardWork forward = run->context().take_forward_work();
    reduction.add_forward_work(forward.tokens, forward.flops);
    const double grad_norm = gradient.has_units ? run->weight_update->clip_grad_norm(config.optim.clip_grad_norm) : 0.0;
    const StepTotals totals =
        reduction.reduce(communicator, gradient, grad_norm, stop_signals.requested(step + 1, communicator.rank()));

    // Skipped steps do not advance the schedule: it counts applied updates.
    const double lr =
        learning_rate_at(config.schedule, config.optim.lr, step - run->state.skipped_steps, config.train.max_steps);
    const bool applied = guard.apply_update(step + 1, gradient.has_units, totals.nonfinite, totals.loss);
    if (applied) run->weight_update->step(lr);
    run->module().end_step(run->context());
    run->state.completed_steps = step + 1;
    if (!applied) ++run->state.skipped_steps;

    const EvalResult eval = evaluator.after_step(step + 1, step + 1 == config.train.max_steps);
    best.after_eval(step + 1, eval);

    recorder.record({step + 1, epoch, lr, grad_norm, &gradient, &totals, run->state.skipped_steps, guard.faults(),
                     guard.spikes(), &eval});
    stopping = stopping || totals.stop_requested;
    const bool saved = checkpointer.after_step(run->state.completed_steps, stopping);
    run->directory->confirm_start();  // a step completed: the run it replaced can go
    if (saved && stopping) return stopped(*run);
    if (best.stop_early()) break;
  }
  return finish(*run, checkpointer, recorder, best.stop_reason());
}

}  // namespace ptrain::train
