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
#pragma once

#include "core/model/lora.h"
#include "core/model/model_config.h"

#include "ptrain/sdk/model.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
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
  at::ScalarType compute_dtype() const { return compute_dtype_; }

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

  const ModelConfig& config() const { return config_; }

  // Detached clones with requires_grad = false (reference / old policy).
  // With LoRA only the adapters are cloned: the frozen base weights are shared.
  std::unique_ptr<CausalLm> frozen_copy() const;

  // input_ids: [B, T] int64, right-padded, values in [0, vocab_size)
  // → [B, T, hidden_size] float32, after the final norm. position_ids and
  // document_ids ([B, T] int64) describe packed rows (sdk::TokenBatch);
  // undefined, positions are 0..T-1 and attention is plain causal.
  at::Tensor hidden_states(const at::Tensor& input_ids, const at::Tensor& position_ids, const at::Tensor& document_ids);

  // Activation checkpointing: keep only each decoder layer's input during the
  // forward and recompute the layer in backward (less memory, one more
  // forward of compute). Same gradients.
  void set_activation_checkpointing(bool enabled) { activation_checkpointing_ = enabled; }

  // Sharding "full" (ZeRO-3): where the decoder layers' parameters live
  // between uses (dist::LayerShards behind it). With a source set, each
  // layer's forward gathers its parameters, runs and releases them, keeping
  // only its input as activation checkpointing does; its backward gathers
  // them again, recomputes the layer and hands the parameters' gradients
  // to the source (none reach their .grad) before releasing them.
  class LayerParameterSource {
   public:
    virtual ~LayerParameterSource() = default;
    virtual void gather(size_t layer) = 0;
    virtual void release(size_t layer) = 0;
    // One per layer_parameters(layer) tensor, in order; undefined: no gradient.
    virtual void add_gradients(size_t layer, const std::vector<at::Tensor>& gradients) = 0;
    // This ← (1 − alpha)·this + alpha·other, layer by layer, for a source
    // sharded alike (soft_update_from). Collective-free.
    virtual void blend_from(LayerParameterSource& other, double alpha) = 0;
    // `layer` is gathered next: its gather may start now, to overlap with
    // the current layer's compute (the forwards' order: ascending; backward's:
    // descending). The default starts nothing.
    virtual void prefetch(size_t /*layer*/) {}
    // Every layer whole until release_whole(); the gathers and releases in
    // between do nothing (generation with the whole model at hand). The
    // defaults do nothing.
    virtual void hold_whole() {}
    virtual void release_whole() {}
  };
  // A sharded model's layers held whole while it lives (`hold` false, or no
  // source: nothing happens).
  class LayersHeldWhole {
   public:
    LayersHeldWhole(CausalLm& model, bool hold) : source_(hold ? model.layer_source_ : nullptr) {
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
  // `source` outlives the model's forwards and backwards; nullptr: none.
  void set_layer_parameter_source(LayerParameterSource* source) { layer_source_ = source; }
  // The same, for a source the model owns from now on (a frozen reference's).
  void adopt_layer_parameter_source(std::unique_ptr<LayerParameterSource> source) {
    owned_layer_source_ = std::move(source);
  }
  size_t num_layers() const { return layers_.size(); }
  // Decoder layer `index`'s tensors that take gradients (the same objects
  // as in named_parameters(): trainable base tensors, or with LoRA the
  // adapters), in a fixed order; the inputs its recomputation differentiates.
  std::vector<at::Tensor> layer_parameters(size_t index) const;
  // Every base tensor of decoder layer `index` (trained or frozen; no
  // adapters), in layer_parameters()' order.
  std::vector<at::Tensor> layer_tensors(size_t index) const;

  // sdk::LanguageModel. target_log_probs projects only the loss_mask rows
  // through lm_head and computes log p = logit[target] - logsumexp(logits).
  sdk::TargetLogProbs target_log_probs(const sdk::TokenBatch& batch) override;
  at::Tensor logits(const at::Tensor& input_ids) override;  // [B, T] int64 → [B, T, V] float32
  int64_t vocab_size() const override { return config_.vocab_size; }
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
  struct Layer {
    at::Tensor input_norm;   // [H]
    at::Tensor q_weight;     // [num_heads * head_dim, H]
    at::Tensor q_bias;       // [num_heads * head_dim] or undefined
    at::Tensor k_weight;     // [num_kv_heads * head_dim, H]
    at::Tensor k_bias;       // [num_kv_heads * head_dim] or undefined
    at::Tensor v_weight;     // [num_kv_heads * head_dim, H]
    at::Tensor v_bias;       // [num_kv_heads * head_dim] or undefined
    at::Tensor o_weight;     // [H, num_heads * head_dim]
    at::Tensor o_bias;       // [H] or undefined
    at::Tensor q_norm;       // [head_dim] (Qwen3) or undefined
    at::Tensor k_norm;       // [head_dim] (Qwen3) or undefined
    at::Tensor post_norm;    // [H]
    at::Tensor gate_weight;  // [I, H]
    at::Tensor up_weight;    // [I, H]
    at::Tensor down_weight;  // [H, I]

    // The LoRA adapters by LoraTarget (undefined where not wrapped), and
    // the layer's position in layers_ (which picks its dropout masks).
    std::array<LoraPair, kLoraTargetCount> lora;
    size_t index = 0;

    const at::Tensor& weight(LoraTarget target) const;
    const at::Tensor& bias(LoraTarget target) const;  // undefined where the projection has none
  };

  // Takes tensors in expected_parameters() order; binds the typed handles.
  CausalLm(ModelConfig config, std::vector<std::pair<std::string, at::Tensor>> params);
  void bind_handles();
  void bind_lora_handles();
  // `t` on the weights' device (moved when it is elsewhere, e.g. a host batch).
  at::Tensor on_model_device(const at::Tensor& t) const;
  // model::linear at the model's compute dtype.
  at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {}) const;
  // One of a layer's seven projections: dense, plus its LoRA update when wrapped.
  at::Tensor projection(const Layer& layer, LoraTarget target, const at::Tensor& x,
                        const LoraDropout& dropout = {}) const;

  // What every layer of one forward shares: rotary tables ([T, d], or
  // [B, T, d] with position_ids) and which keys each query may read
  // (attention_compat::attend: `allowed` [B, 1, T, T] for packed rows,
  // [1, 1, T, T] for a sliding window shorter than T, undefined for plain
  // causal; `blocked` for the unfused kernel; `sequence_starts` instead of
  // `allowed` for packed rows on CUDA, attention_varlen.h).
  struct AttentionLayout {
    at::Tensor cos;
    at::Tensor sin;
    at::Tensor allowed;
    at::Tensor blocked;
    at::Tensor sequence_starts;
    LoraDropout lora_dropout;  // the adapters' input dropout of this forward
  };
  AttentionLayout attention_layout(int64_t t, const at::Tensor& position_ids, const at::Tensor& document_ids);

  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  // A projection's output viewed per head, [B, T, n, d]: RMSNorm over d with
  // `norm` (Qwen3's q_norm / k_norm), then rotary embeddings times `scale`
  // → [B, n, T, d]. Without `norm`, the rotary embedding alone.
  at::Tensor normed_rotary(const at::Tensor& heads, const at::Tensor& norm, const at::Tensor& cos,
                           const at::Tensor& sin, double scale) const;
  at::Tensor attention(const Layer& layer, const at::Tensor& x, const AttentionLayout& layout) const;
  at::Tensor mlp(const Layer& layer, const at::Tensor& x, const LoraDropout& dropout = {}) const;
  // Decoder layer `index`: x + attention, then + MLP. [B, T, H] → [B, T, H].
  at::Tensor decoder_layer(size_t index, const at::Tensor& x, const AttentionLayout& layout) const;
  // decoder_layer without keeping activations; recomputed in backward
  // (causal_lm_checkpoint.cpp).
  at::Tensor checkpointed_layer(size_t index, const at::Tensor& x, const AttentionLayout& layout) const;
  // Sharded: gathers layer `index` and starts the gather of layer `index` +
  // `direction` (+1 in forwards, −1 in backward) when there is one.
  void gather_layer(size_t index, int direction) const;
  struct CheckpointFunction;  // the autograd node of checkpointed_layer
  sdk::TargetLogProbs score_targets(const sdk::TokenBatch& batch, bool with_entropy);
  // decode_step's attention: writes this step's keys and values into the
  // cache at slot `start` and attends over slots [0, start + t).
  at::Tensor cached_attention(const Layer& layer, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                              const at::Tensor& blocked, at::Tensor& key_cache, at::Tensor& value_cache,
                              int64_t start) const;
  // decode_step's mask over the cache: [B, t, start + t] bool (causal_lm_kv_cache.cpp).
  at::Tensor blocked_cache_slots(const KvCache& cache, const at::Tensor& positions, int64_t start, int64_t t) const;
  const at::Tensor& lm_head_weight() const { return config_.tie_word_embeddings ? embed_tokens_ : lm_head_; }
  void ensure_rope_cache(int64_t length);
  // The next training forward's LoRA dropout seed (counts the forward).
  uint64_t dropout_seed();

  ModelConfig config_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
  at::Tensor embed_tokens_;  // [V, H]
  // A layer's base tensors (defined or not), in layer_parameters()' order.
  static std::vector<const at::Tensor*> base_tensors(const Layer& layer);

  std::vector<Layer> layers_;
  at::Tensor final_norm_;  // [H]
  at::Tensor lm_head_;     // [V, H]; undefined when tied

  // cos/sin of position × inv_freq (rope_inv_freq: with config.json's
  // rope scaling) for positions 0..rope_length_-1, recomputed
  // only when a longer sequence arrives. [L, head_dim] float32 each.
  at::Tensor rope_cos_;
  at::Tensor rope_sin_;
  int64_t rope_length_ = 0;

  // LoRA: the adapters by PEFT key (named_parameters() order); each
  // training forward's dropout seed mixes the seed, the step and the
  // forward's count within the step.
  std::optional<LoraSpec> lora_;
  std::vector<std::pair<std::string, at::Tensor>> lora_params_;
  uint64_t lora_seed_ = 0;
  uint64_t lora_step_ = 0;
  uint64_t lora_forwards_ = 0;
  std::filesystem::path source_dir_;

  bool activation_checkpointing_ = false;
  LayerParameterSource* layer_source_ = nullptr;
  std::unique_ptr<LayerParameterSource> owned_layer_source_;  // destroyed with the model
  at::ScalarType stored_dtype_ = at::kFloat;
  at::ScalarType compute_dtype_ = at::kFloat;
};

}  // namespace ptrain::model
