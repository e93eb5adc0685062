#include "core/train/run_setup.h"

#include "core/data/jsonl_reader.h"
#include "core/log/logger.h"
#include "core/model/lora_adapter_dir.h"
#include "core/model/model_transforms.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/train/best_model.h"
#include "core/train/compute_device.h"
#include "core/train/step_recorder.h"
#include "ptrain/sdk/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace ptrain::train {

namespace {

// The sdk::ChatTemplate::named() name of a configured template; empty for auto.
std::string template_name(config::ChatTemplateChoice choice) {
  switch (choice) {
    case config::ChatTemplateChoice::kChatml:
      return "chatml";
    case config::ChatTemplateChoice::kLlama3:
      return "llama3";
    case config::ChatTemplateChoice::kPlain:
      return "plain";
    case config::ChatTemplateChoice::kCustom:
      return "custom";
    case config::ChatTemplateChoice::kAuto:
      break;
  }
  return "";
}

}  // namespace

std::optional<sdk::ChatTemplate> make_chat_template(const config::TokenizerSection& section,
                                                    std::optional<sdk::ChatTemplate> own) {
  if (section.chat_template == config::ChatTemplateChoice::kCustom) {
    sdk::ChatTemplate custom;
    custom.name = "custom";
    custom.begin = section.chat_begin;
    custom.system = {section.chat_system_prefix, section.chat_system_suffix};
    custom.user = {section.chat_user_prefix, section.chat_user_suffix};
    custom.assistant = {section.chat_assistant_prefix, section.chat_assistant_suffix};
    custom.turn_separator = section.chat_turn_separator;
    custom.trim_content = section.chat_trim_content;
    return custom;
  }
  if (section.chat_template == config::ChatTemplateChoice::kAuto) {
    return own;  // none: chat data will fail naming tokenizer.chat_template
  }
  return sdk::ChatTemplate::named(template_name(section.chat_template));
}

std::unique_ptr<sdk::Tokenizer> make_tokenizer(const config::TokenizerSection& section) {
  if (section.kind == config::TokenizerKind::kBytes) {
    auto bytes = std::make_unique<tokenizer::ByteTokenizer>();
    bytes->set_chat_template(make_chat_template(section, sdk::ChatTemplate::named("plain")));
    return bytes;
  }
  auto hf = tokenizer::HfTokenizer::load(section.path);
  // Every sequence a plugin builds ends with eos (SFT completions, DPO responses).
  if (hf->eos_id() < 0) {
    throw sdk::ConfigError(section.path + ": no eos token: put a tokenizer_config.json with \"eos_token\" beside it");
  }
  // The model's own template is parsed only when it is used, and then now:
  // one the Jinja engine cannot render stops the run before it starts.
  const bool own = section.chat_template == config::ChatTemplateChoice::kAuto;
  hf->set_chat_template(make_chat_template(section, own ? hf->own_chat_template() : std::nullopt));
  return hf;
}

std::optional<model::LoraSpec> lora_spec(const config::LoraSection& section) {
  if (section.rank <= 0) return std::nullopt;
  model::LoraSpec spec;
  spec.rank = section.rank;
  spec.alpha = section.alpha;
  spec.use_rslora = section.use_rslora;
  spec.dropout = section.dropout;
  // config::LoraModule lists the projections in model::LoraTarget's order.
  for (const config::LoraModule module : section.target_modules) {
    spec.targets.push_back(model::all_lora_targets().at(static_cast<size_t>(module)));
  }
  return spec;
}

void add_lora_adapters(const config::RunConfig& config, model::CausalLm& policy) {
  const std::optional<model::LoraSpec> spec = lora_spec(config.lora);
  if (!spec) return;
  policy.add_lora(*spec, config.seed);
  if (!config.lora.init.empty()) model::load_lora_adapter_dir(policy, config.lora.init);
  int64_t trainable = 0;
  for (const auto& [name, t] : policy.named_parameters()) trainable += t.numel();
  log::info("lora", "rank " + std::to_string(spec->rank) + ", alpha " + nlohmann::json(spec->alpha).dump() +
                        (spec->use_rslora ? " (rsLoRA: scale alpha / √rank)" : "") + ": " + std::to_string(trainable) +
                        " trainable adapter parameters on frozen base weights" +
                        (config.lora.init.empty() ? "" : ", continuing from " + config.lora.init));
}

std::unique_ptr<model::CausalLm> make_policy(const config::RunConfig& config, const sdk::Tokenizer& tokenizer,
                                             at::Device device) {
  std::unique_ptr<model::CausalLm> policy;
  if (!config.model.init.empty()) {
    policy = model::CausalLm::load_hf_dir(config.model.init, device);
  } else {
    const model::ModelConfig& architecture = config.model;
    architecture.validate();
    policy = model::CausalLm::init_random(architecture, config.seed);
  }
  model::apply_activation_checkpointing(*policy, config.model.activation_checkpointing);
  model::apply_precision(*policy, compute_dtype(config.runtime.precision));
  policy->to_device(device);
  add_lora_adapters(config, *policy);
  const model::ModelConfig& loaded = policy->config();
  if (loaded.vocab_size < tokenizer.vocab_size()) {
    throw sdk::ConfigError("model vocab_size " + std::to_string(loaded.vocab_size) +
                           " is smaller than the tokenizer's " + std::to_string(tokenizer.vocab_size()) + " ids");
  }
  if (config.data.max_length > loaded.max_position_embeddings) {
    throw sdk::ConfigError(
        "data.max_length = " + std::to_string(config.data.max_length) +
        " exceeds the model's max_position_embeddings = " + std::to_string(loaded.max_position_embeddings));
  }
  return policy;
}

namespace {

// Reads `path` and checks every example with the plugin, as data.on_error says.
std::vector<sdk::Example> checked_examples(const std::string& path, const config::RunConfig& config,
                                           const sdk::TrainModule& module, std::vector<std::string>& skipped) {
  const bool skip = config.data.on_error == config::OnBadExample::kSkip;
  std::vector<sdk::Example> read = data::read_jsonl(path, skip ? &skipped : nullptr);
  std::vector<sdk::Example> examples;
  examples.reserve(read.size());
  for (sdk::Example& example : read) {
    try {
      module.check_example(example);
    } catch (const sdk::DataError& error) {
      if (!skip) throw;
      skipped.push_back(error.what());
      continue;
    }
    example.index = static_cast<int64_t>(examples.size());
    examples.push_back(std::move(example));
  }
  if (examples.empty()) {
    throw sdk::DataError(path + ": no usable example (" + std::to_string(skipped.size()) +
                         " skipped by data.on_error = \"skip\"; first: " + skipped.front() + ")");
  }
  // Every rank reads the whole file, so every rank skips the same lines and
  // reports the same counts; the data order depends on the kept count only.
  if (!skipped.empty()) {
    log::warn("data", "skipped " + std::to_string(skipped.size()) + " bad examples of " +
                          std::to_string(skipped.size() + examples.size()) + " in " + path +
                          " (data.on_error = \"skip\")");
    constexpr size_t kListed = 5;
    for (size_t i = 0; i < std::min(kListed, skipped.size()); ++i) log::warn("data", "skipped " + skipped[i]);
  }
  return examples;
}

}  // namespace

std::vector<sdk::Example> load_examples(const config::RunConfig& config, const sdk::TrainModule& module,
                                        std::vector<std::string>* skipped_out) {
  std::vector<std::string> local_skipped;
  return checked_examples(config.data.train, config, module, skipped_out ? *skipped_out : local_skipped);
}

std::vector<sdk::Example> load_eval_examples(const config::RunConfig& config, const sdk::TrainModule& module) {
  if (config.eval.data.empty()) return {};
  std::vector<std::string> skipped;
  std::vector<sdk::Example> examples = checked_examples(config.eval.data, config, module, skipped);
  if (config.eval.max_examples > 0 && static_cast<int64_t>(examples.size()) > config.eval.max_examples) {
    examples.resize(static_cast<size_t>(config.eval.max_examples));
  }
  // Not in the training set: a plugin must not look them up in what
  // prepare_dataset() made of it (sdk::TrainModule::prepare_eval).
  for (sdk::Example& example : examples) example.index = -1;
  return examples;
}

sdk::MicrobatchPlan microbatch_plan(const config::RunConfig& config) {
  const config::BatchSection& batch = config.batch;
  sdk::MicrobatchPlan plan;
  plan.micro_size = batch.micro_size;
  plan.micro_tokens = batch.micro_tokens;
  if (plan.micro_size <= 0 && plan.micro_tokens <= 0) plan.micro_size = batch.global_size;
  plan.group_by_length = batch.group_by_length;
  plan.packing = batch.packing;
  plan.row_tokens = config.data.max_length;
  return plan;
}

ModuleFactory module_factory(const plugin::LoadedPlugin& plugin) {
  return [&plugin] { return plugin.create_module(); };
}

void RunParts::prepare_dataset(plugin::HostContext::ExampleSource later_batches) {
  context->set_example_source(std::move(later_batches));
  module->prepare_dataset(*context, examples);
}

RunParts load_run_parts(const config::RunConfig& config, const ModuleFactory& make_module, at::Device device,
                        dist::Communicator& communicator, plugin::HostContext::FrozenModelHook on_frozen_model) {
  auto tokenizer = make_tokenizer(config.tokenizer);
  auto policy = make_policy(config, *tokenizer, device);
  plugin::ModuleHandle module = make_module();
  auto context =
      std::make_unique<plugin::HostContext>(*policy, *tokenizer, config.module, communicator,
                                            sdk::RunInfo{config.seed, config.data.max_length, 0, 0, config.output_dir});
  context->set_frozen_model_hook(std::move(on_frozen_model));
  context->policy_rollout_engine().set_hold_whole_model(config.distributed.generation_gather ==
                                                        config::GenerationGather::kWhole);
  module->setup(*context);
  check_best_metric(config, *module);
  check_console_metrics(config, *module);
  std::vector<sdk::Example> examples = load_examples(config, *module);
  std::vector<sdk::Example> eval_examples = load_eval_examples(config, *module);
  std::unique_ptr<GenerationEval> generation_eval;
  if (!config.eval.rewards.empty()) {
    generation_eval = std::make_unique<GenerationEval>(config, *policy, *tokenizer, eval_examples);
  }
  return {device,
          std::move(tokenizer),
          std::move(policy),
          std::move(module),
          std::move(context),
          std::move(examples),
          std::move(eval_examples),
          std::move(generation_eval)};
}

}  // namespace ptrain::train
