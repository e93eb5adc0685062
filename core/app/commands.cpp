#include "core/app/commands.h"

#include "core/config/config_loader.h"
#include "core/config/core_sections.h"
#include "core/config/schema_markdown.h"
#include "core/data/global_batch_sampler.h"
#include "core/dist/c10d_communicator.h"
#include "core/dist/launch_env.h"
#include "core/dist/launcher.h"
#include "core/log/logger.h"
#include "core/metrics/tensorboard_writer.h"
#include "core/plugin/host_context.h"
#include "core/plugin/plugin_loader.h"
#include "core/train/compute_device.h"
#include "core/train/cpu_kernels.h"
#include "core/train/run_files.h"
#include "core/train/run_lock.h"
#include "core/train/run_setup.h"
#include "core/train/trainer.h"

#include <cstdio>
#include <iostream>

namespace ptrain::app {
namespace fs = std::filesystem;

namespace {

struct LoadedRun {
  plugin::LoadedPlugin plugin;
  config::RunConfig config;
};

// Reads the config, finds its plugin, and validates every section, the
// plugin's own included, against its schema.
LoadedRun load_run(const ConfigOptions& options) {
  const config::ConfigDocument document = config::ConfigDocument::load(options.config_file, options.overrides);
  plugin::LoadedPlugin plugin = plugin::load_plugin(document.plugin(), plugin::plugin_search_dirs(options.plugin_dirs));
  config::RunConfig config = document.resolve(plugin.config_schema());
  train::pin_cpu_kernels(config);  // may restart the process: before anything is logged or run
  log::info("plugin", "loaded " + std::string(plugin.info().name) + " from " + plugin.resolved_path().string() +
                          " (sha256 " + plugin.sha256() + ")");
  return {std::move(plugin), std::move(config)};
}

}  // namespace

int command_train(const ConfigOptions& options, bool overwrite, const std::string& resume) {
  // First, while this is the process's only thread (stop_signals.h).
  const train::StopSignals stop_signals;
  const dist::LaunchEnv launch = dist::read_launch_env();
  log::init_logging(launch.rank);
  LoadedRun run = load_run(options);
  // The collectives run where the rank computes: NCCL on a GPU, Gloo on the CPU.
  const at::Device device = train::resolve_device(run.config, launch.local_rank, launch.local_world_size);
  auto communicator = dist::make_communicator(launch, std::chrono::seconds(run.config.distributed.timeout_s), device);
  train::TrainOptions train_options;
  train_options.device = device;
  train_options.overwrite = overwrite;
  train_options.resume = resume;
  train_options.resolved_config_toml = config::to_toml(run.config, run.plugin.config_schema());
  train::run_training(run.config, run.plugin, *communicator, train_options, stop_signals);
  return 0;
}

namespace {

// A path beneath the working directory as the user would type it
// (build/lib/...), any other as it is.
std::string display_path(const fs::path& path) {
  std::error_code error;
  const fs::path relative = path.lexically_relative(fs::current_path(error));
  if (error || relative.empty() || *relative.begin() == "..") return path.string();
  return relative.string();
}

// ", by generation scored with accuracy, closeness" with eval.rewards, else "".
std::string generation_note(const config::EvalSection& eval) {
  std::string note;
  for (const std::string& reward : eval.rewards) note += (note.empty() ? ", by generation scored with " : ", ") + reward;
  return note;
}

// What `ptrain validate` prints once everything loaded.
void print_validated(const ConfigOptions& options, const plugin::LoadedPlugin& plugin, const config::RunConfig& config,
                     const train::RunParts& parts, const data::GlobalBatchSampler& sampler) {
  const double epochs = static_cast<double>(config.train.max_steps) / static_cast<double>(sampler.steps_per_epoch());
  char epochs_text[32];
  std::snprintf(epochs_text, sizeof epochs_text, "%.2f", epochs);
  std::cout << "config OK: " << options.config_file.string() << "\n"
            << "  plugin     " << plugin.info().name << " " << plugin.info().version << " ("
            << display_path(plugin.path()) << ")\n"
            << "  model      " << parts.policy->num_parameters() << " parameters, "
            << (config.model.init.empty() ? "initialised from [model] sizes" : "loaded from " + config.model.init)
            << "\n"
            << "  compute    " << train::describe_compute(parts.device, config.runtime.precision) << "\n"
            << "  data       " << parts.examples.size() << " examples in " << config.data.train << ", "
            << sampler.steps_per_epoch() << " steps per epoch of " << config.batch.global_size << "\n";
  if (!parts.eval_examples.empty()) {
    std::cout << "  eval       " << parts.eval_examples.size() << " held-out examples in " << config.eval.data << ", "
              << (config.eval.every_steps > 0 ? "every " + std::to_string(config.eval.every_steps) + " steps and "
                                              : std::string())
              << "after the last" << generation_note(config.eval) << "\n";
  }
  std::cout << "  training   " << config.train.max_steps << " steps (" << epochs_text << " epochs) into "
            << config.output_dir << "\n";
}

// What `ptrain train` would say of output_dir (docs/reliability.md "Run directories").
void warn_about_output_dir(const std::string& output_dir) {
  const std::string named = "output_dir '" + output_dir + "'";
  if (const std::optional<std::string> holder = train::lock_holder(output_dir)) {
    log::warn("validate", named + " is in use by another ptrain run: " + *holder +
                              "; `ptrain train` will refuse it until that run ends");
    return;
  }
  const std::vector<std::string> contents = train::contents_of(output_dir);
  if (contents.empty()) return;
  if (train::holds_run_marker(contents)) {
    log::warn("validate",
              named + " already holds a run: `ptrain train` will refuse it without --resume or --overwrite");
    return;
  }
  log::warn("validate", named + " is not empty and is not a ptrain run directory (it holds " +
                            train::list_names(contents) + "): `ptrain train` will refuse it, --overwrite included");
}

}  // namespace

int command_validate(const ConfigOptions& options) {
  log::init_logging(0);
  LoadedRun run = load_run(options);
  const config::RunConfig& config = run.config;
  if (config.logging.tensorboard) metrics::require_tensorboard_available();
  auto communicator = dist::make_single_process_communicator();
  const at::Device device = train::resolve_device(config, communicator->local_rank(), communicator->local_world_size());
  const train::RunParts parts = train::load_run_parts(config, train::module_factory(run.plugin), device, *communicator);
  const data::GlobalBatchSampler sampler(static_cast<int64_t>(parts.examples.size()), config.batch.global_size,
                                         config.seed);
  warn_about_output_dir(config.output_dir);
  print_validated(options, run.plugin, config, parts, sampler);
  return 0;
}

int command_schema(const std::vector<std::string>& plugin_names, const std::vector<fs::path>& plugin_dirs) {
  std::vector<std::pair<std::string, sdk::ConfigSchema>> sections;
  for (const config::CoreSection& section : config::core_sections())
    sections.emplace_back(section.name, section.schema);
  std::cout << config::schema_markdown(sections);
  const std::vector<fs::path> dirs = plugin::plugin_search_dirs(plugin_dirs);
  for (const std::string& name : plugin_names) {
    const plugin::LoadedPlugin plugin = plugin::load_plugin(name, dirs);
    std::cout << "# plugin " << plugin.info().name << "\n\n"
              << config::schema_markdown({{"module", plugin.config_schema()}});
  }
  return 0;
}

int command_launch(const dist::LaunchOptions& options) { return dist::run_launcher(options); }

int command_describe_plugin(const std::string& name_or_path, const std::vector<fs::path>& plugin_dirs) {
  const plugin::LoadedPlugin plugin = plugin::load_plugin(name_or_path, plugin::plugin_search_dirs(plugin_dirs));
  const sdk::PluginInfo& info = plugin.info();
  std::cout << "plugin " << info.name << " " << (info.version ? info.version : "") << ": "
            << (info.description ? info.description : "") << "\n  " << plugin.path().string() << " (SDK ABI "
            << info.abi_version << ", LibTorch " << info.torch_version << ")\n\n[module] keys:\n"
            << config::schema_text(plugin.config_schema());
  return 0;
}

int command_plugins(const std::vector<fs::path>& plugin_dirs) {
  log::init_logging(0);
  const std::vector<fs::path> dirs = plugin::plugin_search_dirs(plugin_dirs);
  const std::vector<plugin::PluginListing> listings = plugin::list_plugins(dirs);
  std::cout << "search path:\n";
  for (const fs::path& dir : dirs)
    std::cout << "  " << dir.string() << (fs::is_directory(dir) ? "" : " (missing)") << "\n";
  std::cout << "plugins (host: SDK ABI " << sdk::kAbiVersion << ", LibTorch " << PTRAIN_TORCH_VERSION << "):\n";
  if (listings.empty()) std::cout << "  none found\n";
  for (const plugin::PluginListing& listing : listings) {
    if (listing.ok) {
      std::cout << "  " << listing.name << " " << listing.version << "  ABI " << listing.abi_version << ", LibTorch "
                << listing.torch_version << "  " << listing.path.string() << "\n      " << listing.description << "\n";
    } else {
      std::cout << "  (unusable) " << listing.error << "\n";
    }
  }
  return 0;
}

}  // namespace ptrain::app
