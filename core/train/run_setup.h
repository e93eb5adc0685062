// The pieces a run is built from, shared by `ptrain train` and `ptrain validate`
// so that validation checks exactly what training will use.
#pragma once

#include "core/config/run_config.h"
#include "core/dist/communicator.h"
#include "core/model/causal_lm.h"
#include "core/plugin/host_context.h"
#include "core/plugin/plugin_loader.h"
#include "core/train/generation_eval.h"
#include "ptrain/sdk/batch.h"
#include "ptrain/sdk/chat.h"
#include "ptrain/sdk/tokenizer.h"
#include "ptrain/sdk/train_module.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptrain::train {

// The byte tokenizer or a tokenizer.json, with the run's chat template
// attached. Throws sdk::ConfigError naming the file and what is wrong or unsupported.
std::unique_ptr<sdk::Tokenizer> make_tokenizer(const config::TokenizerSection& section);

// tokenizer.chat_template resolved: "auto" becomes `own` (the model's own
// Jinja template, "plain" for the byte tokenizer; nullopt when it has none),
// "custom" the chat_* keys, a name the built-in template.
std::optional<sdk::ChatTemplate> make_chat_template(const config::TokenizerSection& section,
                                                    std::optional<sdk::ChatTemplate> own);

// [lora] as the model's adapter spec; nullopt for rank 0 (full fine-tuning).
std::optional<model::LoraSpec> lora_spec(const config::LoraSection& section);

// With lora.rank > 0: freezes the policy's base weights and adds adapters
// (fresh from the seed, or lora.init's), so that only they train.
void add_lora_adapters(const config::RunConfig& config, model::CausalLm& policy);

// Loads model.init, or builds the configured sizes with a seeded init; checks
// the vocabulary covers the tokenizer's and that max_length fits the
// positions; puts it on `device` at runtime.precision's compute dtype; adds
// [lora]'s adapters.
std::unique_ptr<model::CausalLm> make_policy(const config::RunConfig& config, const sdk::Tokenizer& tokenizer,
                                             at::Device device = at::kCPU);

// Reads data.train and checks every example with the plugin. A bad example
// is an sdk::DataError naming file:line, or with data.on_error = "skip" is
// left out, logged, and its message appended to `skipped` (when given).
std::vector<sdk::Example> load_examples(const config::RunConfig& config, const sdk::TrainModule& module,
                                        std::vector<std::string>* skipped = nullptr);

// Reads eval.data (none when it is empty) and checks every example as
// load_examples() does, keeping the first eval.max_examples; the examples
// have index -1 (sdk::TrainModule::prepare_eval).
std::vector<sdk::Example> load_eval_examples(const config::RunConfig& config, const sdk::TrainModule& module);

sdk::MicrobatchPlan microbatch_plan(const config::RunConfig& config);

// Makes the run's plugin module: a loaded plugin library's (`ptrain`,
// testing/), or one compiled into the program (bench/).
using ModuleFactory = std::function<plugin::ModuleHandle()>;
ModuleFactory module_factory(const plugin::LoadedPlugin& plugin);
template <class Module>
ModuleFactory compiled_module() {
  return [] { return plugin::ModuleHandle(nullptr, std::make_unique<Module>()); };
}

// The one recipe a run is built by: `ptrain train`, `ptrain validate`, the
// conformance harness (testing/) and the benchmarks (bench/) all load these,
// in this order, so that a failure names what is wrong before anything later
// loads. Members are destroyed in reverse: the module and the context before
// the models they use.
struct RunParts {
  at::Device device = at::kCPU;  // runtime.device resolved (compute_device.h)
  std::unique_ptr<sdk::Tokenizer> tokenizer;
  std::unique_ptr<model::CausalLm> policy;
  plugin::ModuleHandle module;
  std::unique_ptr<plugin::HostContext> context;
  std::vector<sdk::Example> examples;       // checked by the plugin
  std::vector<sdk::Example> eval_examples;  // eval.data, checked the same way; empty without it
  std::unique_ptr<GenerationEval> generation_eval;  // with eval.rewards: eval/<reward> by generation

  // The module's prepare_dataset() over `examples`, with `later_batches`
  // dealing the examples of later steps the context is asked for
  // (sdk::Context::upcoming_examples). Once, before the first step.
  void prepare_dataset(plugin::HostContext::ExampleSource later_batches);
};

// The tokenizer, the policy on `device` (runtime.device as the caller
// resolved it, once, for its communicator too), the plugin's module set up with
// its context, and the training and held-out sets checked example by example.
// `on_frozen_model` (may be empty) runs on each frozen model (reference, reward) the context hands out.
RunParts load_run_parts(const config::RunConfig& config, const ModuleFactory& make_module, at::Device device,
                        dist::Communicator& communicator, plugin::HostContext::FrozenModelHook on_frozen_model = {});

}  // namespace ptrain::train
