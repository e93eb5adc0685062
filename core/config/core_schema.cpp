#include "core/config/core_schema.h"

namespace ptrain::config {

namespace {

// Bounds the schema cannot express (exclusive ones such as lr > 0 or
// beta2 < 1) are checked in config_loader.cpp; their docs say so here.
std::vector<std::pair<std::string, sdk::ConfigSchema>> build_core_sections() {
  std::vector<std::pair<std::string, sdk::ConfigSchema>> sections;

  sdk::ConfigSchema top;
  top.add_string("plugin", std::nullopt, "training algorithm: a plugin name (sft, dpo, grpo) or a path to its .so")
      .required();
  top.add_int("seed", 0, "seed for initialisation, data order and sampling", 0);
  // No fixed default: two plugins sharing "runs/run" would overwrite each
  // other's runs. The loader derives "runs/<plugin>" (the plugin's file stem).
  top.add_string("output_dir", std::nullopt,
                 "run directory (config.toml, metrics.jsonl, checkpoints/, final/); default runs/<plugin>");
  sections.emplace_back("", std::move(top));

  sdk::ConfigSchema model;
  model.add_string("init", std::nullopt,
                   "Hugging Face model directory (config.json + model.safetensors) to start from; "
                   "excludes the size keys below");
  model.add_int("vocab_size", 384, "vocabulary size of a model built from scratch (>= 259 with the bytes tokenizer)", 1);
  model.add_int("hidden_size", 256, "width of the residual stream; divisible by num_heads", 1);
  model.add_int("intermediate_size", 688, "width of the SwiGLU MLP", 1);
  model.add_int("num_layers", 4, "number of decoder layers", 1);
  model.add_int("num_heads", 4, "attention (query) heads; hidden_size / num_heads must be even for rotary", 1);
  model.add_int("num_kv_heads", 2, "key/value heads (grouped-query attention); divides num_heads", 1);
  model.add_int("max_position_embeddings", 512, "longest sequence the model is built for; >= data.max_length", 1);
  model.add_float("rope_theta", 10000.0, "rotary embedding base (> 0)");
  model.add_float("rms_norm_eps", 1e-6, "epsilon inside RMSNorm (> 0)");
  model.add_bool("tie_word_embeddings", true, "lm_head shares the input embedding matrix");
  model.add_bool("attention_bias", false, "q/k/v projections carry a bias (Qwen2 style)");
  model.add_bool("activation_checkpointing", false,
                 "keep only each decoder layer's input in the forward and recompute the layer in backward: less "
                 "memory for one more forward of compute, same gradients");
  sections.emplace_back("model", std::move(model));

  sdk::ConfigSchema tokenizer;
  tokenizer.add_string("kind", std::nullopt,
                       "\"bytes\" (built-in byte tokenizer) or \"hf\" (tokenizer.json); "
                       "default: \"hf\" if path is set, else \"bytes\"",
                       {"bytes", "hf"});
  tokenizer.add_string("path", std::nullopt,
                       "Hugging Face tokenizer.json (kind = \"hf\" only); tokenizer_config.json beside it gives "
                       "bos/eos/pad and the chat template family");
  tokenizer.add_string("chat_template", "auto",
                       "template for {\"messages\": [...]} data: \"auto\" (from tokenizer_config.json; \"plain\" "
                       "for bytes), \"chatml\", \"llama3\", \"plain\", or \"custom\" (the chat_* keys)",
                       {"auto", "chatml", "llama3", "plain", "custom"});
  tokenizer.add_string("chat_begin", std::nullopt, "custom template: text before the first message, e.g. \"{bos}\"");
  tokenizer.add_string("chat_system_prefix", std::nullopt, "custom template: text before a system message");
  tokenizer.add_string("chat_system_suffix", std::nullopt, "custom template: text after a system message");
  tokenizer.add_string("chat_user_prefix", std::nullopt, "custom template: text before a user message (required)");
  tokenizer.add_string("chat_user_suffix", std::nullopt, "custom template: text after a user message");
  tokenizer.add_string("chat_assistant_prefix", std::nullopt,
                       "custom template: text before an assistant message, also the generation prompt (required)");
  tokenizer.add_string("chat_assistant_suffix", std::nullopt,
                       "custom template: end of an assistant turn, trained on, e.g. \"<|im_end|>\" or \"{eos}\" "
                       "(required)");
  tokenizer.add_string("chat_turn_separator", std::nullopt, "custom template: text after every turn, never trained on");
  tokenizer.add_bool("chat_trim_content", false, "custom template: strip whitespace around each message's content");
  sections.emplace_back("tokenizer", std::move(tokenizer));

  sdk::ConfigSchema data;
  data.add_string("train", std::nullopt, "training set, JSONL, one example a line (relative to the working directory)")
      .required();
  data.add_int("max_length", 512, "tokens per sequence, bos/eos included; longer examples are truncated", 2);
  data.add_string("on_error", "fail",
                  "a bad example (unreadable line, missing or mistyped field): \"fail\" names its file:line and "
                  "stops; \"skip\" leaves it out and reports the count",
                  {"fail", "skip"});
  sections.emplace_back("data", std::move(data));

  sdk::ConfigSchema batch;
  batch.add_int("global_size", std::nullopt, "examples (prompts for GRPO) per optimizer update, over all ranks", 1)
      .required();
  batch.add_int("micro_size", std::nullopt,
                "examples per microbatch (gradient accumulation); default: global_size (no accumulation); "
                "excludes micro_tokens",
                1);
  batch.add_int("micro_tokens", std::nullopt,
                "padded-token budget per microbatch, instead of micro_size; >= data.max_length", 1);
  batch.add_bool("group_by_length", true,
                 "put examples of similar length in the same microbatch (less padding); the step's gradient is the "
                 "same either way");
  batch.add_bool("packing", false,
                 "pack several examples into each row of up to data.max_length tokens (best-fit-decreasing, "
                 "attention and positions kept per example); needs micro_tokens and a plugin that packs (sft, dpo)");
  sections.emplace_back("batch", std::move(batch));

  sdk::ConfigSchema optim;
  optim.add_string("name", "adamw", "optimizer", {"adamw", "sgd"});
  optim.add_float("lr", 1e-4, "peak learning rate (> 0)", 0.0);
  optim.add_float("weight_decay", 0.0, "decoupled weight decay (AdamW) or L2 penalty (SGD)", 0.0);
  optim.add_float("beta1", 0.9, "AdamW first-moment decay, in [0, 1)", 0.0, 1.0);
  optim.add_float("beta2", 0.999, "AdamW second-moment decay, in [0, 1)", 0.0, 1.0);
  optim.add_float("eps", 1e-8, "AdamW denominator epsilon (> 0)", 0.0);
  optim.add_float("momentum", 0.0, "SGD momentum, in [0, 1)", 0.0, 1.0);
  optim.add_float("clip_grad_norm", 1.0, "clip the global gradient L2 norm to this; 0 turns clipping off", 0.0);
  optim.add_bool("decay_norms_and_biases", false,
                 "apply weight_decay to norm weights and biases too (transformers excludes them)");
  sections.emplace_back("optim", std::move(optim));

  sdk::ConfigSchema schedule;
  schedule.add_string("name", "cosine", "learning-rate schedule after warmup", {"constant", "linear", "cosine"});
  schedule.add_int("warmup_steps", 0, "steps of linear warmup from 0 to optim.lr; <= train.max_steps", 0);
  schedule.add_float("min_lr_ratio", 0.0, "floor of the linear/cosine decay as a fraction of optim.lr", 0.0, 1.0);
  sections.emplace_back("schedule", std::move(schedule));

  sdk::ConfigSchema train;
  train.add_int("max_steps", std::nullopt, "optimizer updates to run", 1).required();
  train.add_int("log_every", 1, "log metrics every N updates; <= max_steps", 1);
  train.add_int("max_consecutive_skips", 5,
                "abort after this many consecutive updates skipped for a non-finite loss or gradient norm", 1);
  train.add_float("loss_spike_factor", 5.0,
                  "warn and count a loss_spike when the loss reaches this factor times the largest earlier loss; "
                  "0 turns it off",
                  0.0);
  sections.emplace_back("train", std::move(train));

  sdk::ConfigSchema logging;
  logging.add_bool("tensorboard", false,
                   "also write TensorBoard event files (every metric as a scalar, the resolved config as text) "
                   "in output_dir (events.out.tfevents.*; point tensorboard --logdir at it or its parent)");
  sections.emplace_back("logging", std::move(logging));

  sdk::ConfigSchema checkpoint;
  checkpoint.add_int("every_steps", 0, "save a checkpoint every N updates; 0: only the final model", 0);
  checkpoint.add_int("keep_last", 2, "checkpoints kept on disk; older ones are deleted", 1);
  sections.emplace_back("checkpoint", std::move(checkpoint));

  sdk::ConfigSchema distributed;
  distributed.add_int("timeout_s", 300, "seconds a collective may wait before the run fails", 1);
  distributed.add_int("bucket_mb", 25, "gradient all-reduce bucket size in MiB (buckets start during the last backward)",
                      1);
  sections.emplace_back("distributed", std::move(distributed));

  sdk::ConfigSchema runtime;
  runtime.add_int("threads", 0, "intra-op CPU threads per process; 0: the process's share of the cores", 0);
  sections.emplace_back("runtime", std::move(runtime));

  return sections;
}

}  // namespace

const std::vector<std::pair<std::string, sdk::ConfigSchema>>& core_sections() {
  static const auto sections = build_core_sections();
  return sections;
}

const sdk::ConfigSchema* find_core_section(const std::string& name) {
  for (const auto& [section, schema] : core_sections()) {
    if (section == name) return &schema;
  }
  return nullptr;
}

}  // namespace ptrain::config
