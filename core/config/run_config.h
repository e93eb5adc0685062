// The resolved run configuration as typed structs (docs/config.md).
//
// Each field's key, default, bounds and doc are declared once, in
// core_sections.cpp; ConfigDocument::resolve() (config_loader.h) is the only
// code that reads TOML, and everything below it uses these fields. Choice
// keys are enums by the time anything reads them.
#pragma once

#include "core/model/model_config.h"
#include "ptrain/sdk/config_schema.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace ptrain::config {

// [model]: a Hugging Face directory to start from, or the architecture of a
// model built from scratch, whose keys bind to model::ModelConfig's fields
// directly (attention_bias: qkv_bias, making it a Qwen2 model).
struct ModelSection : model::ModelConfig {
  std::string init;                       // Hugging Face model directory; empty: build from the sizes
  bool activation_checkpointing = false;  // recompute each layer in backward instead of keeping its activations
};

enum class TokenizerKind { kBytes, kHf };
enum class ChatTemplateChoice { kAuto, kChatml, kLlama3, kPlain, kCustom };

struct TokenizerSection {
  TokenizerKind kind = TokenizerKind::kBytes;
  std::string path;  // tokenizer.json when kind = hf
  ChatTemplateChoice chat_template = ChatTemplateChoice::kAuto;
  // The parts of a custom chat template (sdk::ChatTemplate); {bos}/{eos} stand for those ids.
  std::string chat_begin;
  std::string chat_system_prefix;
  std::string chat_system_suffix;
  std::string chat_user_prefix;
  std::string chat_user_suffix;
  std::string chat_assistant_prefix;
  std::string chat_assistant_suffix;  // the end of an assistant turn, trained with assistant_only_loss
  std::string chat_turn_separator;
  bool chat_trim_content = false;
};

enum class OnBadExample { kFail, kSkip };

struct DataSection {
  std::string train;       // JSONL path; relative paths are taken from the working directory
  int64_t max_length = 0;  // tokens per sequence, bos/eos included
  OnBadExample on_error = OnBadExample::kFail;
};

struct BatchSection {
  int64_t global_size = 0;       // examples per optimizer update
  int64_t micro_size = 0;        // examples per microbatch (0 when micro_tokens is used)
  int64_t micro_tokens = 0;      // padded-token budget per microbatch (0 when micro_size is used)
  bool group_by_length = false;  // similar lengths share a microbatch
  bool packing = false;          // several examples per row (needs micro_tokens)
};

enum class OptimizerKind { kAdamW, kSgd };

struct OptimSection {
  OptimizerKind name = OptimizerKind::kAdamW;
  double lr = 0.0;
  double weight_decay = 0.0;
  double beta1 = 0.0;
  double beta2 = 0.0;
  double eps = 0.0;
  double momentum = 0.0;        // sgd only
  double clip_grad_norm = 0.0;  // 0: no clipping
  bool decay_norms_and_biases = false;
};

enum class ScheduleKind { kConstant, kLinear, kCosine };

struct ScheduleSection {
  ScheduleKind name = ScheduleKind::kCosine;
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;  // floor of linear/cosine decay as a fraction of lr
};

struct TrainSection {
  int64_t max_steps = 0;
  int64_t log_every = 0;
  int64_t max_consecutive_skips = 0;    // non-finite steps in a row that abort the run
  double loss_spike_factor = 0.0;       // 0: no spike detection
  int64_t early_stopping_patience = 0;  // evaluations without a better checkpoint.best_metric that end the run; 0: off
};

struct LoggingSection {
  bool tensorboard = false;                  // events.out.tfevents.* files in output_dir
  std::vector<std::string> console_metrics;  // shown on the step line after the core's (train::check_console_metrics)
};

// The dtype final/ is written in; kAuto: the dtype the initial model was stored in.
enum class SaveDtype { kAuto, kFloat32, kBFloat16 };
// Which way checkpoint.best_metric improves.
enum class BestMode { kMin, kMax };

struct CheckpointSection {
  int64_t every_steps = 0;  // 0: only the final model
  int64_t keep_last = 0;
  SaveDtype save_dtype = SaveDtype::kAuto;
  std::string max_shard_size;  // weights above it are sharded; parse_byte_size() reads it (byte_size.h)
  std::string best_metric;     // an eval/<metric> that picks best/; empty: no best/
  BestMode best_mode = BestMode::kMin;
};
// Evaluation on a held-out set during training (core/train/evaluator.h).
struct EvalSection {
  std::string data;          // held-out JSONL in the plugin's format; empty: no evaluation
  int64_t every_steps = 0;   // 0: only after the last step
  int64_t max_examples = 0;  // the first N examples of data; 0: all of them
  // Evaluation by generation (train/generation_eval.h): the held-out prompts'
  // completions scored by these rewards, logged as eval/<reward>; empty: none.
  std::vector<std::string> rewards;
  int64_t max_new_tokens = 64;
  double temperature = 0.0;  // 0: greedy
  int64_t num_generations = 1;
  std::string answer_field;  // empty: "answer", or "completion" in a file of SFT examples
};

// What data-parallel ranks split among themselves (docs/distributed.md#sharding-distributedsharding): kNone
// replicates everything; kOptimizer (ZeRO-1/2) shards the reduced gradients
// and the optimizer state; kFull (ZeRO-3/FSDP) also shards the decoder
// layers' parameters (core/shard/sharded_layers.h).
enum class ShardingMode { kNone, kOptimizer, kFull };

// The projections LoRA can wrap, in transformers' module order (model::LoraTarget).
enum class LoraModule { kQProj, kKProj, kVProj, kOProj, kGateProj, kUpProj, kDownProj };

// LoRA adapters (core/model/lora.h); rank 0: full fine-tuning.
struct LoraSection {
  int64_t rank = 0;
  double alpha = 0.0;
  bool use_rslora = false;
  double dropout = 0.0;
  std::vector<LoraModule> target_modules;
  std::string init;  // a PEFT adapter directory to continue from; empty: fresh adapters
  bool save_merged = false;
};

// Under sharding "full": how generation gets the policy's decoder layers.
enum class GenerationGather { kLayer, kWhole };

struct DistributedSection {
  int64_t timeout_s = 0;
  int64_t bucket_mb = 0;  // gradient all-reduce bucket size
  ShardingMode sharding = ShardingMode::kNone;
  GenerationGather generation_gather = GenerationGather::kLayer;
};

enum class DeviceChoice { kAuto, kCpu, kCuda };
// kBf16Mixed: float32 master weights, gradients and optimizer state; the
// model's matrix products read bfloat16 operands (docs/devices.md#runtimeprecision).
enum class Precision { kFp32, kBf16Mixed };

// kAvx2: LibTorch's, oneDNN's and OpenBLAS's CPU kernels capped at AVX2, so a
// seeded run logs the same figures on every x86-64 CPU with AVX2
// (docs/reliability.md#the-same-run).
enum class CpuKernels { kNative, kAvx2 };

struct RuntimeSection {
  int64_t threads = 0;  // 0: the process's share of the cores
  DeviceChoice device = DeviceChoice::kAuto;
  Precision precision = Precision::kFp32;
  CpuKernels cpu_kernels = CpuKernels::kNative;
};

struct RunConfig {
  std::filesystem::path source;  // the config file
  std::string plugin;            // a plugin name or a path to its .so
  uint64_t seed = 0;
  std::string output_dir;

  ModelSection model;
  TokenizerSection tokenizer;
  DataSection data;
  BatchSection batch;
  OptimSection optim;
  ScheduleSection schedule;
  TrainSection train;
  LoggingSection logging;
  CheckpointSection checkpoint;
  EvalSection eval;
  LoraSection lora;
  DistributedSection distributed;
  RuntimeSection runtime;

  sdk::ConfigValues module;  // [module], validated against the plugin's schema
};

}  // namespace ptrain::config
