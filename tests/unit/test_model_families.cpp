// The model families of docs/models.md — Llama 3.x rope scaling (llama3,
// linear) and explicit head_dim, Qwen3's q/k RMSNorm, Mistral's sliding
// window — against an independent reference written from the Hugging Face
// definitions (hf_reference_model.h): logits, log-probs and parameter
// gradients on unpadded, right-padded and packed rows, KV-cache generation
// steps against the full forward, bf16-mixed, and the config.json round trip.

#include "catch.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "core/model/causal_lm.h"
#include "core/model/model_transforms.h"
#include "core/model/model_config.h"
#include "hf_reference_model.h"
#include "ptrain/sdk/batch.h"
#include "support/test_util.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using ptrain::model::CausalLm;
using ptrain::model::ModelConfig;
using ptrain::model::RopeScalingType;
using ptrain::testing::contains;
using ptrain::testing::TempDir;
namespace ref = ptrain::testing::hf_reference;

namespace {

ModelConfig base_config(const std::string& type, int64_t head_dim) {
  ModelConfig c;
  c.model_type = type;
  c.vocab_size = 29;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = head_dim;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5;
  c.qkv_bias = c.o_bias = false;
  return c;
}

struct Family {
  const char* label;
  ModelConfig config;
  ModelConfig without_feature;  // the same model minus what this family adds
};

// Small models whose feature visibly changes the logits at these lengths.
std::vector<Family> families() {
  std::vector<Family> out;
  {
    // theta 100, d 8: wave lengths 6.3, 20, 63, 199 against the bands
    // 32 / 4 = 8 and 32 / 1 = 32: one kept, one smoothed, two stretched.
    ModelConfig c = base_config("llama", 8);
    c.rope_theta = 100.0;
    c.rope_scaling.type = RopeScalingType::kLlama3;
    c.rope_scaling.factor = 8.0;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_max_position_embeddings = 32;
    ModelConfig plain = c;
    plain.rope_scaling = {};
    out.push_back({"llama, llama3 rope scaling, head_dim 8", c, plain});
  }
  {
    ModelConfig c = base_config("llama", 6);  // head_dim != hidden_size / num_heads
    c.num_kv_heads = 1;
    c.qkv_bias = c.o_bias = true;
    c.rope_theta = 30.0;
    c.rope_scaling.type = RopeScalingType::kLinear;
    c.rope_scaling.factor = 2.5;
    c.tie_word_embeddings = true;
    ModelConfig plain = c;
    plain.rope_scaling = {};
    out.push_back({"llama, linear rope scaling, head_dim 6, bias, tied", c, plain});
  }
  {
    ModelConfig c = base_config("qwen3", 8);
    c.rope_theta = 1000.0;
    c.tie_word_embeddings = true;
    ModelConfig plain = c;
    plain.model_type = "llama";  // no q/k norm
    out.push_back({"qwen3, q/k norm, head_dim 8, tied", c, plain});
  }
  {
    ModelConfig c = base_config("mistral", 0);
    c.sliding_window = 4;
    ModelConfig plain = c;
    plain.sliding_window = 0;
    out.push_back({"mistral, sliding window 4", c, plain});
  }
  return out;
}

// Values large enough that every term (norm weights, rotations, windows)
// visibly moves the logits.
std::unique_ptr<CausalLm> make_model(const ModelConfig& config, uint64_t seed) {
  auto model = CausalLm::init_random(config, seed);
  at::NoGradGuard no_grad;
  at::manual_seed(seed);
  for (auto& [name, p] : model->named_parameters()) {
    p.copy_(contains(name, "norm.weight") ? 1.0 + 0.3 * at::randn(p.sizes()) : 0.4 * at::randn(p.sizes()));
  }
  return model;
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }
double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return max_abs(a.detach().to(at::kDouble) - b.detach().to(at::kDouble));
}

at::Tensor token_ids(int64_t b, int64_t t, int64_t vocab, int64_t seed) {
  return at::arange(b * t, at::kLong).mul(7).add(seed).remainder(vocab).view({b, t});
}

// A batch as the SFT collator builds it: target = next token, loss on real
// tokens that have a next one in their document.
struct Rows {
  ptrain::sdk::TokenBatch batch;
  at::Tensor positions;  // [B, T], as the reference reads them
  at::Tensor documents;  // [B, T], -1 on padding
  at::Tensor weights;    // [B, T] double: a random linear functional of the log-probs
};

// documents per row: lengths of consecutive documents, then right padding to T.
Rows make_rows(const std::vector<std::vector<int64_t>>& documents, int64_t t, int64_t vocab, bool packed) {
  const auto b = static_cast<int64_t>(documents.size());
  Rows r;
  const at::Tensor ids = token_ids(b, t, vocab, 3);
  r.positions = at::zeros({b, t}, at::kLong);
  r.documents = at::full({b, t}, -1, at::kLong);
  at::Tensor mask = at::zeros({b, t}, at::kBool);
  at::Tensor targets = at::zeros({b, t}, at::kLong);
  for (int64_t row = 0; row < b; ++row) {
    int64_t start = 0;
    for (size_t doc = 0; doc < documents[row].size(); ++doc) {
      const int64_t length = documents[row][doc];
      r.positions[row].narrow(0, start, length).copy_(at::arange(length, at::kLong));
      r.documents[row].narrow(0, start, length).fill_(static_cast<int64_t>(doc));
      mask[row].narrow(0, start, length - 1).fill_(true);
      targets[row].narrow(0, start, length - 1).copy_(ids[row].narrow(0, start + 1, length - 1));
      start += length;
    }
  }
  r.batch = ptrain::sdk::TokenBatch(ids, targets, mask);
  if (packed) {
    r.batch.position_ids = r.positions;
    r.batch.document_ids = r.documents;
  } else {
    // Unpacked rows: one document each, padding after it (its positions go on).
    r.positions = at::arange(t, at::kLong).expand({b, t}).clone();
    r.documents = at::zeros({b, t}, at::kLong);
  }
  at::manual_seed(11);
  r.weights = at::randn({b, t}, at::kDouble) * mask;
  return r;
}

// Σ weights · log p(target) in the reference, with its gradients in `p`.
at::Tensor reference_log_probs(const ref::Params& p, const ModelConfig& c, const Rows& r) {
  const at::Tensor logits = ref::logits(p, c, r.batch.input_ids, r.positions, r.documents);
  return at::log_softmax(logits, -1).gather(2, r.batch.target_ids.unsqueeze(2)).squeeze(2);  // [B, T]
}

// ptrain's log-probs and parameter gradients against the reference's:
// |Δ log p| and, per parameter, ‖Δ grad‖ / max(1, ‖grad‖) below
// `tolerance`. Returns ptrain's log-probs.
at::Tensor check_scores(CausalLm& model, const Family& family, const Rows& r, const char* layout, double tolerance) {
  for (const auto& [name, t] : model.named_parameters()) t.mutable_grad() = at::Tensor();
  const ptrain::sdk::TargetLogProbs out = model.target_log_probs(r.batch);
  (out.log_probs.to(at::kDouble) * r.weights).sum().backward();

  ref::Params p = ref::copy_params(model.named_parameters());
  const at::Tensor expected = reference_log_probs(p, family.config, r);
  (expected * r.weights).sum().backward();
  const at::Tensor mask = r.batch.loss_mask;
  const double lp_diff = max_abs_diff(out.log_probs.masked_select(mask), expected.masked_select(mask));
  std::printf("[families] %s, %s: max |log p - reference| = %.3g\n", family.label, layout, lp_diff);
  CHECK(lp_diff < tolerance);
  double worst = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    const at::Tensor& want = p.at(name).grad();
    REQUIRE(t.grad().defined());
    const double relative =
        (t.grad().to(at::kDouble) - want).norm().item<double>() / std::max(1.0, want.norm().item<double>());
    INFO(name);
    CHECK(relative < tolerance);
    worst = std::max(worst, relative);
  }
  std::printf("[families] %s, %s: max over parameters of |grad - reference| / max(1, |reference|) = %.3g\n",
              family.label, layout, worst);
  return out.log_probs.detach();
}

}  // namespace

TEST_CASE("model families: logits of unpadded rows match the Hugging Face reference", "[model][families]") {
  for (const Family& family : families()) {
    INFO(family.label);
    auto model = make_model(family.config, 1);
    // 140 positions: LibTorch 1.13's unfused attention splits the queries
    // into two blocks, each masking its own rows of the window.
    for (const int64_t t : {14, 140}) {
      const at::Tensor ids = token_ids(2, t, family.config.vocab_size, 5);
      const at::Tensor positions = at::arange(t, at::kLong).expand({2, t}).clone();
      const at::Tensor documents = at::zeros({2, t}, at::kLong);
      const ref::Params p = ref::copy_params(model->named_parameters());
      const at::Tensor expected = ref::logits(p, family.config, ids, positions, documents);
      const double diff = max_abs_diff(model->logits(ids), expected);
      // The feature must matter here, or the comparison would not test it.
      const double feature = max_abs_diff(ref::logits(p, family.without_feature, ids, positions, documents), expected);
      std::printf(
          "[families] %s, T=%ld: max |logits - reference| = %.3g (max |logit| %.3g); without the feature the "
          "reference moves by %.3g\n",
          family.label, static_cast<long>(t), diff, max_abs(expected), feature);
      // float32 (rotary tables, as transformers' own, and sums over up to
      // 140 keys) against double: the bound scales with the logits.
      CHECK(diff < 2e-5 * std::max(1.0, max_abs(expected)));
      CHECK(feature > 1e-2);
    }
  }
}

TEST_CASE("model families: rope_inv_freq equals the Hugging Face rope definitions", "[model][families]") {
  for (const Family& family : families()) {
    INFO(family.label);
    const ModelConfig& c = family.config;
    at::Tensor expected = ref::inv_freq(c);
    if (c.rope_scaling.type == RopeScalingType::kLinear) expected = expected / c.rope_scaling.factor;
    const at::Tensor got = ptrain::model::rope_inv_freq(c.rope_theta, c.resolved_head_dim(), c.rope_scaling);
    CHECK(got.scalar_type() == at::kFloat);
    CHECK(max_abs_diff(got, expected) / max_abs(expected) < 1e-6);
  }
}

TEST_CASE("model families: log-probs and gradients of padded and packed rows match the reference",
          "[model][families]") {
  for (const Family& family : families()) {
    INFO(family.label);
    auto model = make_model(family.config, 2);
    const int64_t vocab = family.config.vocab_size;
    // Right-padded rows longer than the sliding window.
    check_scores(*model, family, make_rows({{13}, {8}, {4}}, 13, vocab, false), "padded", 1e-5);
    // Packed rows: positions restart per document, the window counts within one.
    const Rows packed = make_rows({{5, 7}, {9, 3, 2}}, 14, vocab, true);
    check_scores(*model, family, packed, "packed", 1e-5);
    ptrain::model::apply_activation_checkpointing(*model, true);
    check_scores(*model, family, packed, "packed, activation checkpointing", 1e-5);
  }
}

TEST_CASE("model families: bf16-mixed stays within bf16 rounding of the reference", "[model][families][bf16]") {
  for (const Family& family : families()) {
    INFO(family.label);
    auto model = make_model(family.config, 3);
    model->set_compute_dtype(at::kBFloat16);
    const Rows packed = make_rows({{5, 7}, {9, 3, 2}}, 14, family.config.vocab_size, true);
    // bf16 operands keep 8 significant bits; with these large random weights
    // the log-probs move by up to about 0.1 ...
    const at::Tensor log_probs = check_scores(*model, family, packed, "packed bf16", 0.15);
    // ... while dropping the family's feature moves them by far more: bf16
    // keeps the feature.
    const ref::Params p = ref::copy_params(model->named_parameters());
    const at::Tensor without = reference_log_probs(p, family.without_feature, packed);
    const double feature =
        max_abs_diff(log_probs.masked_select(packed.batch.loss_mask), without.masked_select(packed.batch.loss_mask));
    std::printf("[families] %s, packed bf16: without the feature the reference is %.3g away\n", family.label, feature);
    CHECK(feature > 1.0);
  }
}

TEST_CASE("model families: KV-cache generation steps equal the reference's full forward", "[model][families]") {
  for (const Family& family : families()) {
    INFO(family.label);
    auto model = make_model(family.config, 4);
    const ref::Params p = ref::copy_params(model->named_parameters());
    // Two left-padded prompts (6 and 3 tokens), then 9 steps of one token:
    // both rows outgrow the sliding window.
    std::vector<std::vector<int64_t>> rows = {{3, 9, 1, 20, 7, 14}, {5, 11, 2}};
    const int64_t prompt = 6;
    at::Tensor ids = at::zeros({2, prompt}, at::kLong);
    at::Tensor positions = at::zeros({2, prompt}, at::kLong);
    at::Tensor valid = at::zeros({2, prompt}, at::kBool);
    for (int64_t r = 0; r < 2; ++r) {
      const auto n = static_cast<int64_t>(rows[r].size());
      ids[r].narrow(0, prompt - n, n).copy_(at::tensor(rows[r], at::kLong));
      positions[r].narrow(0, prompt - n, n).copy_(at::arange(n, at::kLong));
      valid[r].narrow(0, prompt - n, n).fill_(true);
    }
    CausalLm::KvCache cache = model->new_kv_cache(2, prompt + 9);
    at::Tensor step_logits = model->decode_step(ids, positions, valid, cache);  // [2, V]
    double worst = 0;
    double largest_logit = 0;
    for (int64_t step = 0; step <= 9; ++step) {
      for (int64_t r = 0; r < 2; ++r) {
        const auto n = static_cast<int64_t>(rows[r].size());
        const at::Tensor full = ref::logits(p, family.config, at::tensor(rows[r], at::kLong).unsqueeze(0),
                                            at::arange(n, at::kLong).unsqueeze(0), at::zeros({1, n}, at::kLong));
        worst = std::max(worst, max_abs_diff(step_logits[r], full[0][n - 1]));
        largest_logit = std::max(largest_logit, max_abs(full[0][n - 1]));
      }
      if (step == 9) break;
      at::Tensor next = at::zeros({2, 1}, at::kLong);
      at::Tensor next_positions = at::zeros({2, 1}, at::kLong);
      for (int64_t r = 0; r < 2; ++r) {
        const int64_t token = (step * 5 + r * 3 + 1) % family.config.vocab_size;
        next_positions[r][0] = static_cast<int64_t>(rows[r].size());
        next[r][0] = token;
        rows[r].push_back(token);
      }
      step_logits = model->decode_step(next, next_positions, at::ones({2, 1}, at::kBool), cache);
    }
    std::printf("[families] %s: max |KV-cache step logits - reference full forward| = %.3g (largest logit %.3g)\n",
                family.label, worst, largest_logit);
    // fp32 rounding of two summation orders, relative to the logits' size (as
    // above): LibTorch 2.11's CPU kernels land at 1.02e-5 on logits near 1.
    CHECK(worst < 1e-5 * std::max(1.0, largest_logit));
  }
}

TEST_CASE("model families: save_hf_dir writes config.json keys that load back the same model", "[model][families]") {
  for (const Family& family : families()) {
    INFO(family.label);
    auto model = make_model(family.config, 5);
    TempDir dir("families");
    model->save_hf_dir(dir.path() / "m");
    std::ifstream in(dir.path() / "m" / "config.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    const ModelConfig& c = family.config;
    CHECK(j["model_type"] == c.model_type);
    CHECK(j["head_dim"] == c.resolved_head_dim());
    if (c.rope_scaling.type == RopeScalingType::kLlama3) {
      CHECK(j["rope_scaling"] == nlohmann::json{{"rope_type", "llama3"},
                                                {"factor", 8.0},
                                                {"low_freq_factor", 1.0},
                                                {"high_freq_factor", 4.0},
                                                {"original_max_position_embeddings", 32}});
    } else if (c.rope_scaling.type == RopeScalingType::kLinear) {
      CHECK(j["rope_scaling"] == nlohmann::json{{"rope_type", "linear"}, {"factor", 2.5}});
    } else {
      CHECK(j["rope_scaling"].is_null());
    }
    if (c.model_type == "mistral") CHECK(j["sliding_window"] == 4);
    if (c.model_type == "qwen3") CHECK(j["architectures"][0] == "Qwen3ForCausalLM");

    auto loaded = CausalLm::load_hf_dir(dir.path() / "m");
    CHECK(loaded->config() == c);
    const at::Tensor ids = token_ids(1, 12, c.vocab_size, 2);
    CHECK(at::equal(loaded->logits(ids), model->logits(ids)));
  }
}

TEST_CASE("model families: ModelConfig reads Llama 3.2, Qwen3 and Mistral config.json files", "[model][families]") {
  // As published with meta-llama/Llama-3.2-1B, Qwen/Qwen3-0.6B and mistralai/Mistral-7B-v0.1.
  const auto llama = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");
  const ModelConfig l = ModelConfig::from_hf_json(llama, "llama/config.json");
  CHECK(l.rope_scaling.type == RopeScalingType::kLlama3);
  CHECK(l.rope_scaling.factor == 32.0);
  CHECK(l.rope_scaling.low_freq_factor == 1.0);
  CHECK(l.rope_scaling.high_freq_factor == 4.0);
  CHECK(l.rope_scaling.original_max_position_embeddings == 8192);
  CHECK(l.rope_theta == 500000.0);
  CHECK(l.resolved_head_dim() == 64);
  CHECK(l.tie_word_embeddings);

  const auto qwen = nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
  const ModelConfig q = ModelConfig::from_hf_json(qwen, "qwen3/config.json");
  CHECK(q.has_qk_norm());
  CHECK(q.resolved_head_dim() == 128);  // not hidden_size / num_heads = 64
  CHECK_FALSE(q.qkv_bias);
  CHECK(q.sliding_window == 0);
  CHECK(q.rope_scaling.type == RopeScalingType::kNone);

  const auto mistral = nlohmann::json::parse(R"({
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})");
  ModelConfig m = ModelConfig::from_hf_json(mistral, "mistral/config.json");
  CHECK(m.sliding_window == 4096);
  CHECK_FALSE(m.qkv_bias);
  CHECK_FALSE(m.has_qk_norm());
  // Mistral v0.2 and later: null is full causal attention.
  auto v3 = mistral;
  v3["sliding_window"] = nullptr;
  CHECK(ModelConfig::from_hf_json(v3, "mistral/config.json").sliding_window == 0);

  // transformers 5 writes rope_parameters (rope_theta included) instead.
  auto v5 = llama;
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = llama["rope_scaling"];
  v5["rope_parameters"]["rope_theta"] = 500000.0;
  CHECK(ModelConfig::from_hf_json(v5, "llama/config.json") == l);
  // The older "type" key names the type as well as "rope_type".
  auto old_key = llama;
  old_key["rope_scaling"].erase("rope_type");
  old_key["rope_scaling"]["type"] = "llama3";
  CHECK(ModelConfig::from_hf_json(old_key, "llama/config.json") == l);
}
