#include "core/config/core_sections.h"

#include "ptrain/sdk/util/config_binder.h"

#include <algorithm>

namespace ptrain::config {
namespace {

using sdk::above;
using sdk::at_least;
using sdk::between;
using sdk::ConfigBinder;

// The type-erased section of `binder`, bound to the member `section` of RunConfig.
template <class Section>
CoreSection bind_section(std::string name, Section RunConfig::*section, ConfigBinder<Section> binder) {
  sdk::ConfigSchema schema = binder.schema();
  return CoreSection{std::move(name), std::move(schema),
                     [binder, section](const sdk::ConfigValues& values, RunConfig& config) {
                       binder.read_into(values, config.*section);
                     },
                     [binder, section](const RunConfig& config) { return binder.write(config.*section); }};
}

CoreSection top_level() {
  // No fixed output_dir default: two plugins sharing "runs/run" would
  // overwrite each other's runs. The loader derives "runs/<plugin>".
  const auto binder =
      ConfigBinder<RunConfig>()
          .key("plugin", &RunConfig::plugin, sdk::required,
               "training algorithm: a plugin name (sft, dpo, grpo) or a path to its .so")
          .key("seed", &RunConfig::seed, 0, "seed for initialisation, data order and sampling", at_least(0))
          .key("output_dir", &RunConfig::output_dir, sdk::unset,
               "run directory (config.toml, metrics.jsonl, checkpoints/, final/): missing, empty or a ptrain run "
               "directory (docs/reliability.md); default runs/<plugin>");
  return CoreSection{"", binder.schema(),
                     [binder](const sdk::ConfigValues& values, RunConfig& config) { binder.read_into(values, config); },
                     [binder](const RunConfig& config) { return binder.write(config); }};
}

CoreSection model_section() {
  auto binder =
      ConfigBinder<ModelSection>()
          .key("init", &ModelSection::init, sdk::unset,
               "Hugging Face model directory (config.json + model.safetensors) to start from; excludes the size "
               "keys below")
          .key("vocab_size", &ModelSection::vocab_size, 384,
               "vocabulary size of a model built from scratch (>= 259 with the bytes tokenizer)", at_least(1))
          .key("hidden_size", &ModelSection::hidden_size, 256,
               "width of the residual stream; divisible by num_heads unless head_dim is set", at_least(1))
          .key("intermediate_size", &ModelSection::intermediate_size, 688, "width of the SwiGLU MLP", at_least(1))
          .key("num_layers", &ModelSection::num_layers, 4, "number of decoder layers", at_least(1))
          .key("num_heads", &ModelSection::num_heads, 4,
               "attention (query) heads; hidden_size / num_heads must be even for rotary", at_least(1))
          .key("num_kv_heads", &ModelSection::num_kv_heads, 2,
               "key/value heads (grouped-query attention); divides num_heads", at_least(1))
          .key("head_dim", &ModelSection::head_dim, 0,
               "width of each attention head, even for rotary; 0: hidden_size / num_heads (Qwen3 and Mistral Nemo "
               "set it explicitly)",
               at_least(0))
          .key("max_position_embeddings", &ModelSection::max_position_embeddings, 512,
               "longest sequence the model is built for; >= data.max_length", at_least(1))
          .key("rope_theta", &ModelSection::rope_theta, 10000.0, "rotary embedding base", above(0.0))
          .key("rms_norm_eps", &ModelSection::rms_norm_eps, 1e-6, "epsilon inside RMSNorm", above(0.0))
          .key("tie_word_embeddings", &ModelSection::tie_word_embeddings, true,
               "lm_head shares the input embedding matrix")
          .key("attention_bias", &ModelSection::qkv_bias, false, "q/k/v projections carry a bias (Qwen2 style)")
          .key("activation_checkpointing", &ModelSection::activation_checkpointing, false,
               "keep only each decoder layer's input in the forward and recompute the layer in backward: less "
               "memory for one more forward of compute, same gradients");
  CoreSection section = bind_section("model", &RunConfig::model, std::move(binder));
  // Bias on q/k/v only is the Qwen2 layout; without it the model is a Llama.
  section.read = [read = section.read](const sdk::ConfigValues& values, RunConfig& config) {
    read(values, config);
    config.model.model_type = config.model.qkv_bias ? "qwen2" : "llama";
  };
  // With init, the sizes describe no model: they are neither read nor written.
  section.write = [write = section.write](const RunConfig& config) {
    KeyValues values = write(config);
    if (config.model.init.empty()) return values;
    const auto& sizes = model_size_keys();
    values.erase(std::remove_if(values.begin(), values.end(),
                                [&](const auto& entry) {
                                  return std::find(sizes.begin(), sizes.end(), entry.first) != sizes.end();
                                }),
                 values.end());
    return values;
  };
  return section;
}

CoreSection tokenizer_section() {
  const sdk::Choices<TokenizerKind> kinds{{"bytes", TokenizerKind::kBytes}, {"hf", TokenizerKind::kHf}};
  const sdk::Choices<ChatTemplateChoice> templates{{"auto", ChatTemplateChoice::kAuto},
                                                   {"chatml", ChatTemplateChoice::kChatml},
                                                   {"llama3", ChatTemplateChoice::kLlama3},
                                                   {"plain", ChatTemplateChoice::kPlain},
                                                   {"custom", ChatTemplateChoice::kCustom}};
  using T = TokenizerSection;
  auto binder =
      ConfigBinder<T>()
          .choice("kind", &T::kind, kinds, sdk::unset,
                  "\"bytes\" (built-in byte tokenizer) or \"hf\" (tokenizer.json); default: \"hf\" if path is set, "
                  "else \"bytes\"")
          .key("path", &T::path, sdk::unset,
               "Hugging Face tokenizer.json (kind = \"hf\" only); tokenizer_config.json beside it gives bos/eos/pad "
               "and the model's chat template")
          .choice("chat_template", &T::chat_template, templates, ChatTemplateChoice::kAuto,
                  "template for {\"messages\": [...]} data: \"auto\" (the model's own Jinja chat_template from "
                  "tokenizer_config.json; \"plain\" for bytes), \"chatml\", \"llama3\", \"plain\", or \"custom\" "
                  "(the chat_* keys)")
          .key("chat_begin", &T::chat_begin, sdk::unset,
               "custom template: text before the first message, e.g. \"{bos}\"")
          .key("chat_system_prefix", &T::chat_system_prefix, sdk::unset,
               "custom template: text before a system message")
          .key("chat_system_suffix", &T::chat_system_suffix, sdk::unset, "custom template: text after a system message")
          .key("chat_user_prefix", &T::chat_user_prefix, sdk::unset,
               "custom template: text before a user message (required)")
          .key("chat_user_suffix", &T::chat_user_suffix, sdk::unset, "custom template: text after a user message")
          .key("chat_assistant_prefix", &T::chat_assistant_prefix, sdk::unset,
               "custom template: text before an assistant message, also the generation prompt (required)")
          .key("chat_assistant_suffix", &T::chat_assistant_suffix, sdk::unset,
               "custom template: end of an assistant turn, trained on, e.g. \"<|im_end|>\" or \"{eos}\" (required)")
          .key("chat_turn_separator", &T::chat_turn_separator, sdk::unset,
               "custom template: text after every turn, never trained on")
          .key("chat_trim_content", &T::chat_trim_content, false,
               "custom template: strip whitespace around each message's content");
  return bind_section("tokenizer", &RunConfig::tokenizer, std::move(binder));
}

CoreSection data_section() {
  const sdk::Choices<OnBadExample> on_error{{"fail", OnBadExample::kFail}, {"skip", OnBadExample::kSkip}};
  auto binder =
      ConfigBinder<DataSection>()
          .key("train", &DataSection::train, sdk::required,
               "training set, JSONL, one example a line (relative to the working directory)")
          .key("max_length", &DataSection::max_length, 512,
               "tokens per sequence, bos/eos included; longer examples are truncated", at_least(2))
          .choice("on_error", &DataSection::on_error, on_error, OnBadExample::kFail,
                  "a bad example (unreadable line, missing or mistyped field): \"fail\" names its file:line and "
                  "stops; \"skip\" leaves it out and reports the count");
  return bind_section("data", &RunConfig::data, std::move(binder));
}

CoreSection batch_section() {
  auto binder =
      ConfigBinder<BatchSection>()
          .key("global_size", &BatchSection::global_size, sdk::required,
               "examples (prompts for GRPO) per optimizer update, over all ranks", at_least(1))
          .key("micro_size", &BatchSection::micro_size, sdk::unset,
               "examples per microbatch (gradient accumulation); default: global_size (no accumulation); excludes "
               "micro_tokens",
               at_least(1))
          .key("micro_tokens", &BatchSection::micro_tokens, sdk::unset,
               "padded-token budget per microbatch, instead of micro_size; >= data.max_length", at_least(1))
          .key("group_by_length", &BatchSection::group_by_length, true,
               "put examples of similar length in the same microbatch (less padding); the step's gradient is the "
               "same either way")
          .key("packing", &BatchSection::packing, false,
               "pack several examples into each row of up to data.max_length tokens (best-fit-decreasing, "
               "attention and positions kept per example); needs micro_tokens and a plugin that packs (sft, dpo)");
  return bind_section("batch", &RunConfig::batch, std::move(binder));
}

CoreSection optim_section() {
  const sdk::Choices<OptimizerKind> optimizers{{"adamw", OptimizerKind::kAdamW}, {"sgd", OptimizerKind::kSgd}};
  using O = OptimSection;
  auto binder = ConfigBinder<O>()
                    .choice("name", &O::name, optimizers, OptimizerKind::kAdamW, "optimizer")
                    .key("lr", &O::lr, 1e-4, "peak learning rate", above(0.0))
                    .key("weight_decay", &O::weight_decay, 0.0, "decoupled weight decay (AdamW) or L2 penalty (SGD)",
                         at_least(0.0))
                    .key("beta1", &O::beta1, 0.9, "AdamW first-moment decay", at_least(0.0).below(1.0))
                    .key("beta2", &O::beta2, 0.999, "AdamW second-moment decay", at_least(0.0).below(1.0))
                    .key("eps", &O::eps, 1e-8, "AdamW denominator epsilon", above(0.0))
                    .key("momentum", &O::momentum, 0.0, "SGD momentum", at_least(0.0).below(1.0))
                    .key("clip_grad_norm", &O::clip_grad_norm, 1.0,
                         "clip the global gradient L2 norm to this; 0 turns clipping off", at_least(0.0))
                    .key("decay_norms_and_biases", &O::decay_norms_and_biases, false,
                         "apply weight_decay to norm weights and biases too (transformers excludes them)");
  return bind_section("optim", &RunConfig::optim, std::move(binder));
}

CoreSection schedule_section() {
  const sdk::Choices<ScheduleKind> schedules{
      {"constant", ScheduleKind::kConstant}, {"linear", ScheduleKind::kLinear}, {"cosine", ScheduleKind::kCosine}};
  using S = ScheduleSection;
  auto binder = ConfigBinder<S>()
                    .choice("name", &S::name, schedules, ScheduleKind::kCosine, "learning-rate schedule after warmup")
                    .key("warmup_steps", &S::warmup_steps, 0,
                         "steps of linear warmup from 0 to optim.lr; <= train.max_steps", at_least(0))
                    .key("min_lr_ratio", &S::min_lr_ratio, 0.0,
                         "floor of the linear/cosine decay as a fraction of optim.lr", between(0.0, 1.0));
  return bind_section("schedule", &RunConfig::schedule, std::move(binder));
}

CoreSection train_section() {
  using T = TrainSection;
  auto binder =
      ConfigBinder<T>()
          .key("max_steps", &T::max_steps, sdk::required, "optimizer updates to run", at_least(1))
          .key("log_every", &T::log_every, 1, "log metrics every N updates; <= max_steps", at_least(1))
          .key("max_consecutive_skips", &T::max_consecutive_skips, 5,
               "abort after this many consecutive updates skipped for a non-finite loss or gradient norm", at_least(1))
          .key("loss_spike_factor", &T::loss_spike_factor, 5.0,
               "warn and count a loss_spike when the loss reaches this factor times the largest earlier loss; 0 "
               "turns it off",
               at_least(0.0))
          .key("early_stopping_patience", &T::early_stopping_patience, 0,
               "stop the run after this many evaluations in a row without a better checkpoint.best_metric; 0 turns "
               "early stopping off",
               at_least(0));
  return bind_section("train", &RunConfig::train, std::move(binder));
}

CoreSection logging_section() {
  auto binder =
      ConfigBinder<LoggingSection>()
          .key("tensorboard", &LoggingSection::tensorboard, false,
               "also write TensorBoard event files (every metric as a scalar, the resolved config as text) in "
               "output_dir (events.out.tfevents.*; point tensorboard --logdir at it or its parent)")
          .key("console_metrics", &LoggingSection::console_metrics, std::vector<std::string>{},
               "metrics the console's step line shows after loss, lr, grad_norm and tok/s, in this order: the "
               "plugin's (e.g. kl, rewards/chosen), eval/<metric>, or the core's (units, tokens, mfu, "
               "step_s, ...); every metric is in metrics.jsonl either way");
  return bind_section("logging", &RunConfig::logging, std::move(binder));
}

CoreSection checkpoint_section() {
  const sdk::Choices<SaveDtype> dtypes{
      {"auto", SaveDtype::kAuto}, {"float32", SaveDtype::kFloat32}, {"bfloat16", SaveDtype::kBFloat16}};
  const sdk::Choices<BestMode> modes{{"min", BestMode::kMin}, {"max", BestMode::kMax}};
  auto binder = ConfigBinder<CheckpointSection>()
                    .key("every_steps", &CheckpointSection::every_steps, 0,
                         "save a checkpoint every N updates; 0: only the final model", at_least(0))
                    .key("keep_last", &CheckpointSection::keep_last, 2,
                         "checkpoints kept on disk; older ones are deleted", at_least(1))
                    .choice("save_dtype", &CheckpointSection::save_dtype, dtypes, SaveDtype::kAuto,
                            "dtype of the weights in final/; auto: the dtype model.init was stored in (float32 for "
                            "a model built from [model] sizes). Checkpoints always keep the float32 weights")
                    .key("max_shard_size", &CheckpointSection::max_shard_size, std::string("5GB"),
                         "weights larger than this are written as model-00001-of-0000N.safetensors shards with "
                         "model.safetensors.index.json, as transformers does (in final/ and checkpoints); an integer "
                         "and a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)")
                    .key("best_metric", &CheckpointSection::best_metric, sdk::unset,
                         "an evaluation metric, e.g. \"eval/loss\": best/ keeps the model of the evaluation where "
                         "it was best (needs eval.data)")
                    .choice("best_mode", &CheckpointSection::best_mode, modes, BestMode::kMin,
                            "\"min\" or \"max\": which way best_metric improves");
  return bind_section("checkpoint", &RunConfig::checkpoint, std::move(binder));
}

CoreSection eval_section() {
  auto binder =
      ConfigBinder<EvalSection>()
          .key("data", &EvalSection::data, sdk::unset,
               "held-out set, JSONL in the plugin's format, checked before training; empty: no evaluation")
          .key("every_steps", &EvalSection::every_steps, 0,
               "evaluate every N updates; 0: only after the last step (which is always evaluated)", at_least(0))
          .key("max_examples", &EvalSection::max_examples, sdk::unset,
               "evaluate on the first N examples of data only; default: all of them", at_least(1))
          .key("rewards", &EvalSection::rewards, std::vector<std::string>{},
               "also generate for each held-out prompt and score the completions with these rewards, logged as "
               "eval/<reward>: accuracy (exact match), closeness, format, length, python:FILE.py:FUNCTION or an "
               "http:// reward server (docs/evaluation.md#evaluation-by-generation); empty: no generation")
          .key("max_new_tokens", &EvalSection::max_new_tokens, 64, "with rewards: tokens per completion at most",
               at_least(1))
          .key("temperature", &EvalSection::temperature, 0.0, "with rewards: sampling temperature; 0: greedy",
               at_least(0.0))
          .key("num_generations", &EvalSection::num_generations, 1, "with rewards: completions per held-out prompt",
               at_least(1))
          .key("answer_field", &EvalSection::answer_field, sdk::unset,
               "with rewards: the field accuracy and closeness compare with; default: answer, or completion in a "
               "file of SFT examples");
  return bind_section("eval", &RunConfig::eval, std::move(binder));
}

CoreSection lora_section() {
  using M = LoraModule;
  const sdk::Choices<M> modules{{"q_proj", M::kQProj},      {"k_proj", M::kKProj},       {"v_proj", M::kVProj},
                                {"o_proj", M::kOProj},      {"gate_proj", M::kGateProj}, {"up_proj", M::kUpProj},
                                {"down_proj", M::kDownProj}};
  const std::vector<M> all{M::kQProj, M::kKProj, M::kVProj, M::kOProj, M::kGateProj, M::kUpProj, M::kDownProj};
  using L = LoraSection;
  auto binder =
      ConfigBinder<L>()
          .key("rank", &L::rank, 0,
               "LoRA rank r: train low-rank adapters y = W x + (alpha / r) · B A dropout(x) on frozen base weights "
               "(docs/lora.md); 0: full fine-tuning",
               at_least(0))
          .key("alpha", &L::alpha, 16.0, "LoRA scale numerator: ΔW = (alpha / rank) · B A", above(0.0))
          .key("use_rslora", &L::use_rslora, false,
               "rank-stabilized LoRA (rsLoRA, PEFT's use_rslora): ΔW = (alpha / √rank) · B A")
          .key("dropout", &L::dropout, 0.0, "dropout on the adapters' input while training, in [0, 1)",
               at_least(0.0).below(1.0))
          .choice("target_modules", &L::target_modules, modules, all,
                  "the projections of every decoder layer that get adapters")
          .key("init", &L::init, sdk::unset,
               "a PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to continue from; its r, "
               "lora_alpha, use_rslora and target_modules must match; empty: fresh adapters (A Kaiming-uniform, B = 0)")
          .key("save_merged", &L::save_merged, false,
               "also write final/merged/ (and best/merged/): a complete model directory with ΔW folded into W");
  return bind_section("lora", &RunConfig::lora, std::move(binder));
}

CoreSection distributed_section() {
  const sdk::Choices<ShardingMode> sharding_modes{
      {"none", ShardingMode::kNone}, {"optimizer", ShardingMode::kOptimizer}, {"full", ShardingMode::kFull}};
  const sdk::Choices<GenerationGather> generation_gathers{{"layer", GenerationGather::kLayer},
                                                          {"whole", GenerationGather::kWhole}};
  auto binder =
      ConfigBinder<DistributedSection>()
          .key("timeout_s", &DistributedSection::timeout_s, 300, "seconds a collective may wait before the run fails",
               at_least(1))
          .key("bucket_mb", &DistributedSection::bucket_mb, 25,
               "gradient all-reduce bucket size in MiB (buckets start during the last backward)", at_least(1))
          .choice("sharding", &DistributedSection::sharding, sharding_modes, ShardingMode::kNone,
                  "what ranks split: none (replicated), optimizer (ZeRO-1/2: gradients reduce-scattered, optimizer "
                  "state sharded), full (ZeRO-3: decoder layers' parameters sharded too, gathered per layer)")
          .choice("generation_gather", &DistributedSection::generation_gather, generation_gathers,
                  GenerationGather::kLayer,
                  "under sharding full, how rollouts get the policy's layers: layer (gathered one at a time for every "
                  "decoding step: least memory) or whole (all gathered once per rollout call and held while it "
                  "samples: as much memory as the whole model, far fewer collectives)");
  return bind_section("distributed", &RunConfig::distributed, std::move(binder));
}

const sdk::Choices<Precision>& precisions() {
  static const sdk::Choices<Precision> spellings{{"fp32", Precision::kFp32}, {"bf16-mixed", Precision::kBf16Mixed}};
  return spellings;
}

CoreSection runtime_section() {
  const sdk::Choices<DeviceChoice> devices{
      {"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"cuda", DeviceChoice::kCuda}};
  const sdk::Choices<CpuKernels> cpu_kernel_sets{{"native", CpuKernels::kNative}, {"avx2", CpuKernels::kAvx2}};
  using R = RuntimeSection;
  auto binder =
      ConfigBinder<R>()
          .key("threads", &R::threads, 0, "intra-op CPU threads per process; 0: the process's share of the cores",
               at_least(0))
          .choice("device", &R::device, devices, DeviceChoice::kAuto,
                  "where each rank computes: cuda:LOCAL_RANK, or the CPU; auto: CUDA when LibTorch has it and every "
                  "process on the node has a GPU of its own, else the CPU")
          .choice("precision", &R::precision, precisions(), Precision::kFp32,
                  "fp32, or bf16-mixed: float32 master weights, gradients and optimizer state, matrix products on "
                  "bfloat16 operands")
          .choice("cpu_kernels", &R::cpu_kernels, cpu_kernel_sets, CpuKernels::kNative,
                  "native: the fastest CPU kernels this CPU has (AVX-512 where it has it); avx2: LibTorch's, "
                  "oneDNN's and OpenBLAS's kernels capped at AVX2, so a seeded run logs the same figures on every "
                  "x86-64 CPU with AVX2 (ptrain restarts itself with their environment variables set)");
  return bind_section("runtime", &RunConfig::runtime, std::move(binder));
}

}  // namespace

const std::string& precision_name(Precision precision) { return sdk::choice_name(precisions(), precision); }

const std::vector<CoreSection>& core_sections() {
  static const std::vector<CoreSection> sections{
      top_level(),     model_section(),    tokenizer_section(),   data_section(),    batch_section(),
      optim_section(), schedule_section(), train_section(),       logging_section(), checkpoint_section(),
      eval_section(),  lora_section(),     distributed_section(), runtime_section()};
  return sections;
}

const sdk::ConfigSchema* find_core_section(const std::string& name) {
  for (const CoreSection& section : core_sections()) {
    if (section.name == name) return &section.schema;
  }
  return nullptr;
}

const std::vector<std::string>& model_size_keys() {
  static const std::vector<std::string> keys = {
      "vocab_size",          "hidden_size",   "intermediate_size",       "num_layers", "num_heads",
      "num_kv_heads",        "head_dim",      "max_position_embeddings", "rope_theta", "rms_norm_eps",
      "tie_word_embeddings", "attention_bias"};
  return keys;
}

}  // namespace ptrain::config
