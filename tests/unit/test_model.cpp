// CausalLm and ModelConfig: the forward pass against a naive double-precision
// reference written with loops, target_log_probs against the full
// log-softmax path (values and gradients), padding invariance, and the
// Hugging Face directory format (round trips and load errors).

#include "catch.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "core/model/causal_lm.h"
#include "core/model/model_config.h"
#include "core/model/safetensors.h"
#include "ptrain/sdk/errors.h"
#include "support/test_util.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace fs = std::filesystem;
using ptrain::model::CausalLm;
using ptrain::model::ModelConfig;
using ptrain::testing::contains;
using ptrain::testing::TempDir;

namespace {

template <class F>
std::string model_error(F&& f) {
  try {
    f();
  } catch (const ptrain::sdk::ModelError& e) {
    return e.what();
  }
  return "<no ModelError thrown>";
}

template <class F>
std::string torch_error(F&& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what();
  }
  return "<no c10::Error thrown>";
}

ModelConfig small_config(const std::string& type, int64_t heads, int64_t kv_heads, bool tied) {
  ModelConfig c;
  c.model_type = type;
  c.vocab_size = 23;
  c.hidden_size = 16;
  c.intermediate_size = 40;
  c.num_layers = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.max_position_embeddings = 256;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  c.qkv_bias = type == "qwen2";
  c.o_bias = false;
  return c;
}

// Replaces the tiny default initialisation with values large enough that
// every term (biases, norm weights, rotations) visibly moves the logits.
void randomize(CausalLm& model, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::manual_seed(seed);
  for (auto& [name, p] : model.named_parameters()) {
    if (contains(name, "norm.weight")) {
      p.copy_(1.0 + 0.2 * at::randn(p.sizes()));
    } else {
      p.copy_(0.3 * at::randn(p.sizes()));
    }
  }
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// ---- naive reference, double precision, one sequence at a time ----

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

Matrix to_matrix(const at::Tensor& t) {  // 2-D, or 1-D as one row
  const at::Tensor d = t.detach().to(at::kDouble).contiguous().view({t.dim() == 1 ? 1 : t.size(0), -1});
  Matrix m(d.size(0), std::vector<double>(d.size(1)));
  for (int64_t r = 0; r < d.size(0); ++r) {
    for (int64_t c = 0; c < d.size(1); ++c) m[r][c] = d[r][c].item<double>();
  }
  return m;
}

// y[t][o] = sum_i w[o][i] x[t][i] + bias[o]
Matrix linear(const Matrix& x, const Matrix& w, const Matrix* bias) {
  Matrix y(x.size(), std::vector<double>(w.size(), 0.0));
  for (size_t t = 0; t < x.size(); ++t) {
    for (size_t o = 0; o < w.size(); ++o) {
      double s = bias ? (*bias)[0][o] : 0.0;
      for (size_t i = 0; i < x[t].size(); ++i) s += w[o][i] * x[t][i];
      y[t][o] = s;
    }
  }
  return y;
}

Matrix rms_norm(const Matrix& x, const Matrix& w, double eps) {
  Matrix y = x;
  for (size_t t = 0; t < x.size(); ++t) {
    double ss = 0;
    for (double v : x[t]) ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / x[t].size() + eps);
    for (size_t i = 0; i < x[t].size(); ++i) y[t][i] = x[t][i] * scale * w[0][i];
  }
  return y;
}

// Rotate-half rotary embedding, written out per pair (i, i + d/2).
void apply_rope(Matrix& x, int64_t heads, int64_t d, double theta) {
  for (size_t t = 0; t < x.size(); ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < d / 2; ++i) {
        const double angle = static_cast<double>(t) * std::pow(theta, -2.0 * i / d);
        const double a = x[t][h * d + i];
        const double b = x[t][h * d + i + d / 2];
        x[t][h * d + i] = a * std::cos(angle) - b * std::sin(angle);
        x[t][h * d + i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

Matrix reference_logits(CausalLm& model, const std::vector<int64_t>& ids) {
  const ModelConfig& c = model.config();
  std::map<std::string, Matrix> p;
  for (const auto& [name, t] : model.named_parameters()) p[name] = to_matrix(t);
  const Matrix& embed = p.at("model.embed_tokens.weight");
  const int64_t d = c.resolved_head_dim();
  const int64_t group = c.num_heads / c.num_kv_heads;
  const size_t n = ids.size();

  Matrix x;
  for (int64_t id : ids) x.push_back(embed[id]);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    auto bias = [&](const std::string& name) { return p.count(pre + name) ? &p.at(pre + name) : nullptr; };
    const Matrix h = rms_norm(x, p.at(pre + "input_layernorm.weight"), c.rms_norm_eps);
    Matrix q = linear(h, p.at(pre + "self_attn.q_proj.weight"), bias("self_attn.q_proj.bias"));
    Matrix k = linear(h, p.at(pre + "self_attn.k_proj.weight"), bias("self_attn.k_proj.bias"));
    const Matrix v = linear(h, p.at(pre + "self_attn.v_proj.weight"), bias("self_attn.v_proj.bias"));
    apply_rope(q, c.num_heads, d, c.rope_theta);
    apply_rope(k, c.num_kv_heads, d, c.rope_theta);
    Matrix attn(n, std::vector<double>(c.num_heads * d, 0.0));
    for (int64_t head = 0; head < c.num_heads; ++head) {
      const int64_t kv = head / group;
      for (size_t t = 0; t < n; ++t) {
        std::vector<double> score(t + 1);  // causal: keys 0..t only
        double max_score = -1e300;
        for (size_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += q[t][head * d + i] * k[s][kv * d + i];
          score[s] = dot / std::sqrt(static_cast<double>(d));
          max_score = std::max(max_score, score[s]);
        }
        double total = 0;
        for (double& e : score) total += (e = std::exp(e - max_score));
        for (size_t s = 0; s <= t; ++s) {
          for (int64_t i = 0; i < d; ++i) attn[t][head * d + i] += score[s] / total * v[s][kv * d + i];
        }
      }
    }
    const Matrix o = linear(attn, p.at(pre + "self_attn.o_proj.weight"), bias("self_attn.o_proj.bias"));
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < x[t].size(); ++i) x[t][i] += o[t][i];
    }
    const Matrix h2 = rms_norm(x, p.at(pre + "post_attention_layernorm.weight"), c.rms_norm_eps);
    const Matrix gate = linear(h2, p.at(pre + "mlp.gate_proj.weight"), nullptr);
    Matrix act = linear(h2, p.at(pre + "mlp.up_proj.weight"), nullptr);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < act[t].size(); ++i) act[t][i] *= gate[t][i] / (1.0 + std::exp(-gate[t][i]));
    }
    const Matrix down = linear(act, p.at(pre + "mlp.down_proj.weight"), nullptr);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < x[t].size(); ++i) x[t][i] += down[t][i];
    }
  }
  const Matrix final_hidden = rms_norm(x, p.at("model.norm.weight"), c.rms_norm_eps);
  return linear(final_hidden, c.tie_word_embeddings ? embed : p.at("lm_head.weight"), nullptr);
}

at::Tensor matrix_to_tensor(const Matrix& m) {
  at::Tensor t = at::empty({static_cast<int64_t>(m.size()), static_cast<int64_t>(m[0].size())}, at::kDouble);
  for (size_t r = 0; r < m.size(); ++r) {
    for (size_t c = 0; c < m[r].size(); ++c) t[r][c] = m[r][c];
  }
  return t;
}

void check_against_reference(const ModelConfig& config, const char* label) {
  auto model = CausalLm::init_random(config, 1);
  randomize(*model, 2);
  std::vector<std::vector<int64_t>> sequences = {{3, 17, 0, 22, 5, 5, 9}, {11, 2, 8}};
  // 230 positions: the unfused attention splits the queries into three uneven
  // blocks (76, 77, 77 rows), each reading only the keys before its end.
  sequences.emplace_back();
  for (int64_t i = 0; i < 230; ++i) sequences.back().push_back((i * 7 + i / 5) % config.vocab_size);
  for (const auto& ids : sequences) {
    const at::Tensor input = at::tensor(ids, at::kLong).unsqueeze(0);
    const at::Tensor logits = model->logits(input);  // [1, T, V]
    REQUIRE(logits.sizes() == at::IntArrayRef{1, static_cast<int64_t>(ids.size()), config.vocab_size});
    const at::Tensor expected = matrix_to_tensor(reference_logits(*model, ids));
    const double diff = max_abs_diff(logits[0], expected);
    std::printf("[test_model] %s, T=%zu: max |logits - naive reference| = %.3g (max |logit| %.3g)\n", label, ids.size(),
                diff, expected.abs().max().item<double>());
    CHECK(diff < 1e-5);
  }
}

}  // namespace

// ---------------------------------------------------------------- config

TEST_CASE("ModelConfig reads real transformers config.json files", "[model][config]") {
  const auto qwen = nlohmann::json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 131072, "max_window_layers": 24,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
  const ModelConfig q = ModelConfig::from_hf_json(qwen, "qwen/config.json");
  CHECK(q.model_type == "qwen2");
  CHECK(q.hidden_size == 896);
  CHECK(q.num_heads == 14);
  CHECK(q.num_kv_heads == 2);
  CHECK(q.resolved_head_dim() == 64);
  CHECK(q.num_layers == 24);
  CHECK(q.rope_theta == 1e6);
  CHECK(q.rms_norm_eps == 1e-6);
  CHECK(q.tie_word_embeddings);
  CHECK(q.qkv_bias);
  CHECK_FALSE(q.o_bias);

  const auto llama = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632,
    "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 22, "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": null, "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "use_cache": true, "vocab_size": 32000})");
  const ModelConfig l = ModelConfig::from_hf_json(llama, "llama/config.json");
  CHECK(l.model_type == "llama");
  CHECK(l.num_kv_heads == 4);
  CHECK(l.resolved_head_dim() == 64);
  CHECK_FALSE(l.qkv_bias);
  CHECK_FALSE(l.o_bias);
  CHECK_FALSE(l.tie_word_embeddings);
}

TEST_CASE("ModelConfig defaults, round trip and rejections", "[model][config]") {
  nlohmann::json minimal = {{"model_type", "llama"},   {"vocab_size", 100},      {"hidden_size", 32},
                            {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4}};
  const ModelConfig m = ModelConfig::from_hf_json(minimal, "m.json");
  CHECK(m.num_kv_heads == 4);  // transformers: num_key_value_heads = num_attention_heads
  CHECK(m.max_position_embeddings == 2048);
  CHECK(m.rope_theta == 10000.0);
  CHECK(m.rms_norm_eps == 1e-6);
  CHECK_FALSE(m.tie_word_embeddings);
  minimal["model_type"] = "qwen2";
  CHECK(ModelConfig::from_hf_json(minimal, "m.json").max_position_embeddings == 32768);

  for (const auto& c : {small_config("llama", 4, 2, false), small_config("qwen2", 4, 1, true)}) {
    ModelConfig with_bias = c;
    if (c.model_type == "llama") with_bias.qkv_bias = with_bias.o_bias = true;
    const nlohmann::json j = with_bias.to_hf_json();
    CHECK(j["num_hidden_layers"] == 2);
    CHECK(j["torch_dtype"] == "float32");
    CHECK(ModelConfig::from_hf_json(nlohmann::json::parse(j.dump()), "rt.json") == with_bias);
  }
  CHECK(small_config("llama", 4, 2, false).to_hf_json()["architectures"][0] == "LlamaForCausalLM");

  auto rejected = [](nlohmann::json j) { return model_error([&] { ModelConfig::from_hf_json(j, "cfg.json"); }); };
  nlohmann::json base = small_config("llama", 4, 2, false).to_hf_json();
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"rope_scaling", nlohmann::json{{"type", "yarn"}, {"factor", 2.0}}, "key 'rope_scaling.type'"},
      {"model_type", "gpt_neox", "unsupported model type \"gpt_neox\""},
      {"hidden_act", "gelu", "key 'hidden_act'"},
      {"mlp_bias", true, "key 'mlp_bias'"},
      {"num_key_value_heads", 3, "num_kv_heads (3)"},
      {"num_attention_heads", 5, "hidden_size (16) must be divisible by num_heads (5)"},
      {"vocab_size", 0, "vocab_size must be > 0"},
      {"hidden_size", "16", "key 'hidden_size': expected an integer"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = base;
    j.erase("head_dim");
    j[c.key] = c.value;
    const std::string msg = rejected(j);
    INFO(msg);
    CHECK(contains(msg, "cfg.json"));
    CHECK(contains(msg, c.expected));
  }
  nlohmann::json no_layers = base;
  no_layers.erase("num_hidden_layers");
  CHECK(contains(rejected(no_layers), "key 'num_hidden_layers': required"));
  nlohmann::json sliding = small_config("qwen2", 4, 2, false).to_hf_json();
  sliding["use_sliding_window"] = true;
  CHECK(contains(rejected(sliding), "key 'use_sliding_window'"));
}

// ---------------------------------------------------------------- forward

TEST_CASE("CausalLm logits match a naive step-by-step reference", "[model]") {
  SECTION("llama, multi-head, untied") { check_against_reference(small_config("llama", 4, 4, false), "llama MHA"); }
  SECTION("qwen2, grouped-query (4 q / 2 kv heads), qkv bias, tied") {
    check_against_reference(small_config("qwen2", 4, 2, true), "qwen2 GQA");
  }
  SECTION("llama with attention_bias, one kv head, explicit head_dim, large theta") {
    ModelConfig c = small_config("llama", 4, 1, false);
    c.qkv_bias = c.o_bias = true;
    c.head_dim = 6;  // != hidden_size / num_heads
    c.rope_theta = 500000.0;
    check_against_reference(c, "llama MQA head_dim=6 bias");
  }
}

TEST_CASE("init_random is deterministic and follows transformers' initialisation", "[model]") {
  ModelConfig c = small_config("qwen2", 4, 2, false);
  c.vocab_size = 500;
  auto a = CausalLm::init_random(c, 42);
  auto b = CausalLm::init_random(c, 42);
  auto other = CausalLm::init_random(c, 43);
  const auto pa = a->named_parameters();
  const auto pb = b->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    CHECK(pa[i].first == pb[i].first);
    CHECK(at::equal(pa[i].second, pb[i].second));
    CHECK(pa[i].second.requires_grad());
    CHECK(pa[i].second.scalar_type() == at::kFloat);
  }
  CHECK_FALSE(at::equal(pa[0].second, other->named_parameters()[0].second));
  const at::Tensor embed = pa[0].second.detach();  // [500, 16]
  CHECK(pa[0].first == "model.embed_tokens.weight");
  CHECK(embed.mean().item<double>() == Approx(0.0).margin(0.002));
  CHECK(embed.std().item<double>() == Approx(0.02).epsilon(0.05));
  for (const auto& [name, t] : pa) {
    if (contains(name, "norm.weight")) CHECK(at::equal(t.detach(), at::ones_like(t)));
    if (contains(name, ".bias")) CHECK(at::equal(t.detach(), at::zeros_like(t)));
  }

  // Parameter count from the architecture, computed by hand.
  const int64_t h = 16, i = 40, v = 500, q = 4 * 4, kv = 2 * 4;
  const int64_t per_layer = h * q + q + 2 * (h * kv + kv) + q * h + 3 * h * i + 2 * h;
  CHECK(a->num_parameters() == v * h + 2 * per_layer + h + v * h);
  CHECK(a->vocab_size() == 500);
  CHECK(pa.back().first == "lm_head.weight");
  c.tie_word_embeddings = true;
  CHECK(CausalLm::init_random(c, 1)->num_parameters() == v * h + 2 * per_layer + h);
}

TEST_CASE("right padding does not change the logits of real tokens", "[model]") {
  auto model = CausalLm::init_random(small_config("qwen2", 4, 2, false), 3);
  randomize(*model, 4);
  const std::vector<int64_t> shorter = {5, 9, 1, 14, 7};
  const std::vector<int64_t> longer = {2, 3, 4, 5, 6, 7, 8, 21};
  at::Tensor batch = at::zeros({2, 8}, at::kLong);
  batch[0].narrow(0, 0, 5).copy_(at::tensor(shorter, at::kLong));
  batch[0].narrow(0, 5, 3).fill_(22);  // pad id
  batch[1].copy_(at::tensor(longer, at::kLong));
  const at::Tensor padded = model->logits(batch);
  const at::Tensor alone_short = model->logits(at::tensor(shorter, at::kLong).unsqueeze(0));
  const at::Tensor alone_long = model->logits(at::tensor(longer, at::kLong).unsqueeze(0));
  const double diff_short = max_abs_diff(padded[0].narrow(0, 0, 5), alone_short[0]);
  const double diff_long = max_abs_diff(padded[1], alone_long[0]);
  std::printf("[test_model] padding: max diff short row %.3g, long row %.3g\n", diff_short, diff_long);
  CHECK(diff_short < 1e-5);
  CHECK(diff_long < 1e-5);
}

// ---------------------------------------------------------------- target_log_probs

TEST_CASE("target_log_probs equals the full log-softmax path, values and gradients", "[model]") {
  for (const bool tied : {false, true}) {
    INFO("tied = " << tied);
    auto model = CausalLm::init_random(small_config("qwen2", 4, 2, tied), 5);
    randomize(*model, 6);
    at::manual_seed(9);
    const int64_t b = 3, t = 6, v = 23;
    const at::Tensor input_ids = at::randint(0, v, {b, t}, at::kLong);
    at::Tensor target_ids = at::randint(0, v, {b, t}, at::kLong);
    at::Tensor loss_mask = at::rand({b, t}) < 0.6;
    loss_mask[2].fill_(false);  // a row with no trained positions
    loss_mask[0][0] = true;
    const at::Tensor weights = at::randn({b, t});

    const at::Tensor full_logits = model->logits(input_ids);  // [B, T, V]
    const at::Tensor full = at::log_softmax(full_logits, -1).gather(2, target_ids.unsqueeze(2)).squeeze(2);
    const at::Tensor expected = at::where(loss_mask, full, at::zeros_like(full));
    const at::Tensor expected_argmax = (full_logits.argmax(-1) == target_ids).logical_and(loss_mask);
    (expected * weights).sum().backward();
    std::vector<at::Tensor> expected_grads;
    for (auto& [name, p] : model->named_parameters()) {
      expected_grads.push_back(p.grad().clone());
      p.mutable_grad() = at::Tensor();
    }

    // Targets outside the mask must be ignored, even out of range.
    at::Tensor targets_with_junk = target_ids.clone();
    targets_with_junk.masked_fill_(loss_mask.logical_not(), 999);
    const auto out = model->target_log_probs({input_ids, targets_with_junk, loss_mask});
    REQUIRE(out.log_probs.sizes() == at::IntArrayRef{b, t});
    CHECK(out.log_probs.scalar_type() == at::kFloat);
    CHECK(out.is_argmax.scalar_type() == at::kBool);
    const double value_diff = max_abs_diff(out.log_probs, expected);
    CHECK(value_diff < 1e-5);
    CHECK(at::equal(out.log_probs.masked_select(loss_mask.logical_not()),
                    at::zeros({(~loss_mask).sum().item<int64_t>()})));
    CHECK(at::equal(out.is_argmax, expected_argmax));

    (out.log_probs * weights).sum().backward();
    double grad_diff = 0;
    size_t k = 0;
    for (auto& [name, p] : model->named_parameters()) {
      INFO(name);
      REQUIRE(p.grad().defined());
      const double d = max_abs_diff(p.grad(), expected_grads[k++]);
      grad_diff = std::max(grad_diff, d);
      CHECK(d < 1e-5);
      p.mutable_grad() = at::Tensor();
    }
    std::printf("[test_model] target_log_probs (tied=%d): max value diff %.3g, max grad diff %.3g\n", tied, value_diff,
                grad_diff);
  }
}

TEST_CASE("target_log_probs and logits check their inputs", "[model]") {
  auto model = CausalLm::init_random(small_config("llama", 4, 2, false), 1);
  const at::Tensor ids = at::randint(0, 23, {2, 4}, at::kLong);
  const at::Tensor mask = at::ones({2, 4}, at::kBool);

  CHECK(contains(torch_error([&] { model->logits(ids.clone().fill_(23)); }), "input_ids"));
  CHECK(contains(torch_error([&] { model->logits(ids.to(at::kInt)); }), "input_ids must be int64"));
  CHECK(contains(torch_error([&] { model->logits(ids[0]); }), "input_ids must be [B, T]"));
  CHECK(contains(torch_error([&] { model->logits(at::zeros({1, 257}, at::kLong)); }), "max_position_embeddings"));
  CHECK(contains(torch_error([&] { model->target_log_probs({ids, ids.clone().fill_(-1), mask}); }), "target_ids"));
  CHECK(contains(torch_error([&] {
                   model->target_log_probs({ids, ids, mask.to(at::kLong)});
                 }),
                 "loss_mask must be bool"));
  CHECK(contains(torch_error([&] {
                   model->target_log_probs({ids, ids.narrow(1, 0, 3), mask});
                 }),
                 "target_ids must have the shape"));

  // No trained position at all: zeros, still usable in a loss.
  const auto none = model->target_log_probs({ids, ids, at::zeros({2, 4}, at::kBool)});
  CHECK(at::equal(none.log_probs, at::zeros({2, 4})));
  CHECK_FALSE(none.is_argmax.any().item<bool>());
}

TEST_CASE("frozen_copy is detached and independent", "[model]") {
  auto model = CausalLm::init_random(small_config("qwen2", 4, 2, true), 8);
  auto frozen = model->frozen_copy();
  const at::Tensor ids = at::randint(0, 23, {1, 5}, at::kLong);
  CHECK(at::equal(frozen->logits(ids), model->logits(ids).detach()));
  for (const auto& [name, p] : frozen->named_parameters()) CHECK_FALSE(p.requires_grad());
  CHECK_FALSE(frozen->logits(ids).requires_grad());
  {
    at::NoGradGuard no_grad;
    model->named_parameters()[0].second.add_(1.0);
  }
  CHECK_FALSE(at::equal(frozen->named_parameters()[0].second, model->named_parameters()[0].second.detach()));
}

// ---------------------------------------------------------------- HF directories

TEST_CASE("save_hf_dir then load_hf_dir is bit-identical", "[model][hf]") {
  struct Variant {
    const char* label;
    ModelConfig config;
  };
  ModelConfig llama_bias = small_config("llama", 4, 2, true);
  llama_bias.qkv_bias = llama_bias.o_bias = true;
  const std::vector<Variant> variants = {
      {"llama untied, no bias", small_config("llama", 4, 2, false)},
      {"llama tied, attention_bias", llama_bias},
      {"qwen2 tied, qkv bias", small_config("qwen2", 4, 2, true)},
      {"qwen2 untied, qkv bias", small_config("qwen2", 4, 1, false)},
  };
  for (const Variant& variant : variants) {
    INFO(variant.label);
    TempDir dir("ptrain_model_test");
    auto model = CausalLm::init_random(variant.config, 11);
    randomize(*model, 12);
    model->save_hf_dir(dir.path() / "out");

    // The files as other tools see them.
    std::ifstream config_file(dir.path() / "out" / "config.json");
    const auto config_json = nlohmann::json::parse(config_file);
    CHECK(config_json["model_type"] == variant.config.model_type);
    CHECK(config_json["tie_word_embeddings"] == variant.config.tie_word_embeddings);
    CHECK(config_json["num_key_value_heads"] == variant.config.num_kv_heads);
    if (variant.config.model_type == "llama") CHECK(config_json["attention_bias"] == variant.config.qkv_bias);
    const auto stored = ptrain::model::read_safetensors(dir.path() / "out" / "model.safetensors");
    bool has_lm_head = false;
    for (const auto& [name, t] : stored) {
      has_lm_head = has_lm_head || name == "lm_head.weight";
      CHECK(t.scalar_type() == at::kFloat);
    }
    CHECK(has_lm_head == !variant.config.tie_word_embeddings);
    CHECK(stored.size() == model->named_parameters().size());

    auto loaded = CausalLm::load_hf_dir(dir.path() / "out");
    CHECK(loaded->config() == variant.config);
    const auto original = model->named_parameters();
    const auto reloaded = loaded->named_parameters();
    REQUIRE(original.size() == reloaded.size());
    for (size_t i = 0; i < original.size(); ++i) {
      INFO(original[i].first);
      CHECK(original[i].first == reloaded[i].first);
      CHECK(at::equal(original[i].second, reloaded[i].second));
      CHECK(reloaded[i].second.requires_grad());
    }
    const at::Tensor ids = at::randint(0, 23, {2, 6}, at::kLong);
    CHECK(at::equal(model->logits(ids), loaded->logits(ids)));
  }
}

TEST_CASE("load_hf_dir converts half-precision checkpoints and tolerates known extras", "[model][hf]") {
  TempDir dir("ptrain_model_test");
  const ModelConfig config = small_config("qwen2", 4, 2, true);
  auto model = CausalLm::init_random(config, 13);
  randomize(*model, 14);
  model->save_hf_dir(dir.path());
  std::vector<std::pair<std::string, at::Tensor>> bf16;
  for (const auto& [name, t] : model->named_parameters()) bf16.emplace_back(name, t.detach().to(at::kBFloat16));
  // A tied head written anyway, equal to the embedding, and an old rotary buffer.
  bf16.emplace_back("lm_head.weight", bf16.front().second.clone());
  bf16.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", at::ones({2}));
  ptrain::model::write_safetensors(dir.path() / "model.safetensors", bf16);

  auto loaded = CausalLm::load_hf_dir(dir.path());
  const auto params = loaded->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].second.scalar_type() == at::kFloat);
    CHECK(at::equal(params[i].second, bf16[i].second.to(at::kFloat)));
  }
}

TEST_CASE("load_hf_dir accepts a tied lm_head only as an exact copy", "[model][hf]") {
  TempDir dir("ptrain_model_test");
  const ModelConfig config = small_config("llama", 4, 2, true);
  auto model = CausalLm::init_random(config, 15);
  model->save_hf_dir(dir.path());
  const auto good = model->named_parameters();
  auto write_and_load = [&](std::vector<std::pair<std::string, at::Tensor>> tensors) {
    ptrain::model::write_safetensors(dir.path() / "model.safetensors", tensors);
    return model_error([&] { CausalLm::load_hf_dir(dir.path()); });
  };

  {
    auto tensors = good;
    tensors.emplace_back("lm_head.weight", at::zeros({23, 16}));
    const std::string msg = write_and_load(tensors);
    INFO(msg);
    CHECK(contains(msg, "tensor 'lm_head.weight' differs from model.embed_tokens.weight"));
  }
}
