// A Llama / Qwen2 / Qwen3 / Mistral decoder-only causal LM in plain ATen ops,
// with parameters named and laid out as transformers does, so model
// directories round-trip with Hugging Face tools.
//
//   x = embed_tokens[input_ids]
//   per layer:  x += o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))  with n = rms_norm(x)
//               (Qwen3: rope(rms_norm_head(q_proj(n), q_norm)), likewise for k, per head over head_dim)
//               x += down_proj(silu(gate_proj(n)) * up_proj(n))                       with n = rms_norm(x)
//   logits = lm_head(rms_norm(x))          (lm_head = embed_tokens when tied)
//
// rms_norm(x) = x * rsqrt(mean(x²) + eps) * w (Zhang & Sennrich 2019); rotary
// embeddings (Su et al. 2021) in the rotate-half convention; grouped-query
// attention (Ainslie et al. 2023) repeats each kv head num_heads/num_kv_heads
// times; SwiGLU MLP (Shazeer 2020). Rotary frequencies follow config.json's
// rope_scaling (rope_scaling.h). Positions are 0..T-1 in every row (or
// position_ids for packed rows), and attention is causal — within a
// document for packed rows, and within the last sliding_window positions for
// Mistral (Jiang et al. 2023): inputs must be right-padded, so real tokens
// never attend to padding.
//
// CausalLm holds the weights and composes its parts: the decoder's math
// (decoder.h), Hugging Face directories (hf_model_dir.cpp), LoRA
// (causal_lm_lora.cpp) and KV-cache decoding (causal_lm_kv_cache.cpp).
// Activation checkpointing, sharding "full" and the compute precision are
// applied when the run is built (model_transforms.h).
#pragma once

#include "core/model/decoder.h"
#include "core/model/layer_execution.h"
#include "core/model/layer_parameter_source.h"
#include "core/model/lora.h"
#include "core/model/model_config.h"

#include "ptrain/sdk/model.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptrain::model {

class CausalLm : public sdk::LanguageModel {
 public:
  // Weights of linear layers and embeddings ~ N(0, 0.02²) (transformers'
  // initializer_range), biases 0, norm weights 1. Deterministic in `seed`:
  // draws from a private CPU generator in named_parameters() order.
  static std::unique_ptr<CausalLm> init_random(const ModelConfig& config, uint64_t seed);

  // Hugging Face model directories (implemented in hf_model_dir.cpp).
  // Reads config.json and model.safetensors (or the shards listed in
  // model.safetensors.index.json). Every expected tensor must be present with
  // its exact shape and a floating dtype (converted to float32); unexpected
  // tensors are errors, except rotary `inv_freq` buffers (recomputed) and, in
  // a tied model, an lm_head.weight equal to embed_tokens. stored_dtype()
  // keeps the dtype the file had. Throws
  // sdk::ModelError naming the directory and the tensor. Each tensor moves to
  // `device` in its stored dtype and is widened there.
  static std::unique_ptr<CausalLm> load_hf_dir(const std::filesystem::path& dir, at::Device device = at::kCPU);

  // The decoder of a directory whose head is not lm_head (a sequence
  // classifier's score head, sequence_classifier.h): the tensors of
  // `config` read and checked as load_hf_dir reads them, and every tensor
  // of the directory the decoder does not use left in `rest`, as stored on
  // the host, for the caller to check. `config` decides whether an
  // lm_head.weight is read: a caller without one sets tie_word_embeddings.
  static std::unique_ptr<CausalLm> load_hf_decoder(const std::filesystem::path& dir, const ModelConfig& config,
                                                   at::Device device, std::map<std::string, at::Tensor>& rest);

  // What a saved directory carries besides the architecture and the weights.
  struct SaveOptions {
    // Merged over config.json's architecture keys (e.g. bos_token_id,
    // eos_token_id, which the tokenizer knows and the model does not).
    nlohmann::json config_fields = nlohmann::json::object();
    // Weights larger than this are sharded (sharded_weights.h); 0: one file.
    int64_t max_shard_bytes = 0;
  };

  // Writes config.json and model.safetensors, or its shards and index
  // (contiguous, in `dtype`, which config.json's torch_dtype names) into
  // `dir`, creating it if needed. Writing to a temporary directory and
  // renaming is the caller's concern.
  void save_hf_dir(const std::filesystem::path& dir, at::ScalarType dtype = at::kFloat) const;
  void save_hf_dir(const std::filesystem::path& dir, at::ScalarType dtype, const SaveOptions& options) const;
  // config.json alone (the weights written by other means: a sharded run's
  // ranks each write theirs).
  void save_hf_config(const std::filesystem::path& dir, at::ScalarType dtype, const SaveOptions& options) const;

  // The dtype load_hf_dir found the weights stored in (that of
  // embed_tokens); float32 for init_random. The weights themselves are
  // float32 whatever it is: they are the master weights training updates.
  at::ScalarType stored_dtype() const { return stored_dtype_; }

  // The dtype the dense layers' and lm_head's matrix products read their
  // operands in (model::linear): float32, or bfloat16 under bf16-mixed.
  // Attention's two products read bfloat16 too on LibTorch 1.13's unfused
  // path (attention_compat::attend). Norms, rotary embeddings, softmax and
  // log-softmax statistics stay float32 either way.
  void set_compute_dtype(at::ScalarType dtype);
  at::ScalarType compute_dtype() const { return decoder_.compute_dtype(); }

  // Moves the weights to `device` (they stay leaves with their requires_grad);
  // everything a forward allocates follows the weights' device.
  void to_device(at::Device device);
  at::Device device() const { return embed_tokens_.device(); }

  // Trainable leaves with transformers' names, in transformers' module order.
  // A tied lm_head is not listed (it is model.embed_tokens.weight). With
  // LoRA, the adapters only, by PEFT key (lora.h), layer by layer, A before B.
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const override;

  // The base model's weights with transformers' names, LoRA or not (what
  // save_hf_dir writes).
  const std::vector<std::pair<std::string, at::Tensor>>& base_parameters() const { return params_; }

  // LoRA (lora.h): freezes every base weight and wraps spec.targets of every
  // layer with a fresh adapter (A from `seed`, B = 0) on the model's device.
  // From then on only the adapters are trainable. Once per model.
  void add_lora(const LoraSpec& spec, uint64_t seed);
  const std::optional<LoraSpec>& lora() const { return lora_; }
  // The update step about to run: LoRA's dropout masks follow from (seed,
  // step, forward within the step), so a resumed run draws the same ones.
  void set_dropout_step(int64_t step) {
    lora_step_ = static_cast<uint64_t>(step);
    lora_forwards_ = 0;
  }
  // Replaces the adapters' values with `weights` (PEFT keys, every adapter
  // with its exact shape, nothing else). Throws sdk::ModelError starting
  // with `source` and naming the tensor.
  void load_lora_weights(const std::vector<std::pair<std::string, at::Tensor>>& weights, const std::string& source);
  // The base model alone: the same frozen weight tensors (no copy), no
  // adapters. What a LoRA run's reference model is.
  std::unique_ptr<CausalLm> base_model() const;
  // A model without adapters whose weights are W + (alpha / r) · B A
  // (copies), for a merged model directory.
  std::unique_ptr<CausalLm> merged_copy() const;
  // The directory load_hf_dir read; empty for init_random.
  const std::filesystem::path& source_dir() const { return source_dir_; }

  const ModelConfig& config() const { return decoder_.config(); }

  // Detached clones with requires_grad = false (reference / old policy).
  // With LoRA only the adapters are cloned: the frozen base weights are shared.
  std::unique_ptr<CausalLm> frozen_copy() const;

  // input_ids: [B, T] int64, right-padded, values in [0, vocab_size)
  // → [B, T, hidden_size] float32, after the final norm. position_ids and
  // document_ids ([B, T] int64) describe packed rows (sdk::TokenBatch);
  // undefined, positions are 0..T-1 and attention is plain causal.
  at::Tensor hidden_states(const at::Tensor& input_ids, const at::Tensor& position_ids, const at::Tensor& document_ids);

  // Activation checkpointing and sharding "full" are applied to the model
  // when the run is built (model_transforms.h); this is the interface of
  // sharding's parameter source (layer_parameter_source.h).
  using LayerParameterSource = model::LayerParameterSource;
  // Where the decoder layers' parameters are gathered from; nullptr when
  // the model holds them whole (not sharded).
  LayerParameterSource* layer_source() const { return layer_execution_->layer_source(); }
  // A sharded model's layers held whole while it lives (`hold` false, or no
  // source: nothing happens).
  class LayersHeldWhole {
   public:
    LayersHeldWhole(const CausalLm& model, bool hold) : source_(hold ? model.layer_source() : nullptr) {
      if (source_ != nullptr) source_->hold_whole();
    }
    ~LayersHeldWhole() {
      if (source_ != nullptr) source_->release_whole();
    }
    LayersHeldWhole(const LayersHeldWhole&) = delete;
    LayersHeldWhole& operator=(const LayersHeldWhole&) = delete;

   private:
    LayerParameterSource* source_;
  };
  size_t num_layers() const { return decoder_.num_layers(); }
  // Decoder layer `index`'s tensors that take gradients (the same objects
  // as in named_parameters(): trainable base tensors, or with LoRA the
  // adapters), in a fixed order; the inputs its recomputation differentiates.
  std::vector<at::Tensor> layer_parameters(size_t index) const { return decoder_.layer_parameters(index); }
  // Every base tensor of decoder layer `index` (trained or frozen; no
  // adapters), in layer_parameters()' order.
  std::vector<at::Tensor> layer_tensors(size_t index) const { return decoder_.layer_tensors(index); }

  // sdk::LanguageModel. target_log_probs projects only the loss_mask rows
  // through lm_head and computes log p = logit[target] - logsumexp(logits).
  sdk::TargetLogProbs target_log_probs(const sdk::TokenBatch& batch) override;
  at::Tensor logits(const at::Tensor& input_ids) override;  // [B, T] int64 → [B, T, V] float32
  int64_t vocab_size() const override { return config().vocab_size; }
  int64_t num_parameters() const override;
  void soft_update_from(const sdk::LanguageModel& source, double alpha) override;
  sdk::TargetLogProbs target_log_probs_and_entropy(const sdk::TokenBatch& batch) override;

  // Incremental decoding for generation (causal_lm_kv_cache.cpp). Rows may
  // be left-padded: a slot attends to earlier valid slots of its row, and a
  // padding slot only to itself, so padding never changes a real token.
  struct KvCache {
    std::vector<at::Tensor> keys;    // per layer [B, num_kv_heads, capacity, head_dim]
    std::vector<at::Tensor> values;  // per layer, as keys
    at::Tensor valid;                // [B, capacity] bool: the slot holds a real token
    at::Tensor positions;            // [B, capacity] int64: each slot's rotary position (sliding window)
    int64_t length = 0;              // slots filled
  };
  KvCache new_kv_cache(int64_t batch, int64_t capacity) const;
  // Appends t slots to every row and returns the next-token logits at the
  // last of them. input_ids, positions (rotary position of each token): [B, t]
  // int64; valid: [B, t] bool → [B, V] float32. No gradients are recorded.
  at::Tensor decode_step(const at::Tensor& input_ids, const at::Tensor& positions, const at::Tensor& valid,
                         KvCache& cache);
  // Keeps only the given rows ([A] int64) of a cache, in that order.
  static void keep_cache_rows(KvCache& cache, const at::Tensor& rows);

 private:
  // The transforms that choose how the layers run (model_transforms.h).
  friend void apply_activation_checkpointing(CausalLm& model, bool enabled);
  friend void shard_layers(CausalLm& model, LayerParameterSource& source);
  friend void shard_layers(CausalLm& model, std::unique_ptr<LayerParameterSource> source);
  friend void unshard_layers(CausalLm& model);

  // Takes tensors in expected_parameters() order (hf_model_dir.h); binds the typed handles.
  CausalLm(ModelConfig config, std::vector<std::pair<std::string, at::Tensor>> params);
  void bind_handles();
  void bind_lora_handles();
  // `t` on the weights' device (moved when it is elsewhere, e.g. a host batch).
  at::Tensor on_model_device(const at::Tensor& t) const;
  sdk::TargetLogProbs score_targets(const sdk::TokenBatch& batch, bool with_entropy);
  const at::Tensor& lm_head_weight() const { return config().tie_word_embeddings ? embed_tokens_ : lm_head_; }
  // The next training forward's LoRA dropout seed (counts the forward).
  uint64_t dropout_seed();

  // The decoder layers, their math and the compute dtype (decoder.h).
  Decoder decoder_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
  at::Tensor embed_tokens_;  // [V, H]
  at::Tensor final_norm_;    // [H]
  at::Tensor lm_head_;       // [V, H]; undefined when tied

  // LoRA: the adapters by PEFT key (named_parameters() order); each
  // training forward's dropout seed mixes the seed, the step and the
  // forward's count within the step.
  std::optional<LoraSpec> lora_;
  std::vector<std::pair<std::string, at::Tensor>> lora_params_;
  uint64_t lora_seed_ = 0;
  uint64_t lora_step_ = 0;
  uint64_t lora_forwards_ = 0;
  std::filesystem::path source_dir_;

  // How each decoder layer runs (layer_execution.h); plain until a transform
  // changes it.
  std::unique_ptr<LayerExecution> layer_execution_ = plain_layers();
  // A source the model owns (a frozen reference's shards). Declared after
  // layer_execution_, so it goes first and may still unshard the model.
  std::unique_ptr<LayerParameterSource> owned_layer_source_;
  at::ScalarType stored_dtype_ = at::kFloat;
};

}  // namespace ptrain::model
