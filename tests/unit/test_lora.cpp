// LoRA adapters (core/model/lora.h): the update step trains the adapters
// only, with the gradient LoRA's formula gives; adapters save to and load
// from PEFT directories; merged weights and the adapters-off reference are
// the base model's. References are computed here from the formulas, on a
// plain model without adapters where the formula needs ∂L/∂W.
#include "catch.h"

#include "support/sft_reference.h"
#include "support/test_util.h"

#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/model/causal_lm.h"
#include "core/model/model_transforms.h"
#include "core/model/lora_adapter_dir.h"
#include "core/model/safetensors.h"
#include "core/plugin/host_context.h"
#include "core/shard/sharded_layers.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/optimizer.h"
#include "core/train/update_step.h"
#include "sft_module.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace ptrain;
using testing::relative_error;
using testing::tiny_model_config;
using Pair = testing::PromptCompletion;

constexpr int64_t kMaxLength = 40;

std::vector<Pair> batch_pairs() {
  return {{"1+1=", "2"},
          {"a longer prompt=", "ok"},
          {"q", "a long completion with bytes"},
          {"3*7=", "21"},
          {"x", ""},
          {"medium prompt=", "medium answer"},
          {"héllo ", "wörld"},
          {"9-4=", "5"}};
}

model::LoraSpec spec_of(int64_t rank, double alpha, std::vector<model::LoraTarget> targets = {}) {
  model::LoraSpec spec;
  spec.rank = rank;
  spec.alpha = alpha;
  const auto& all = model::all_lora_targets();
  spec.targets = targets.empty() ? std::vector<model::LoraTarget>(all.begin(), all.end()) : targets;
  return spec;
}

std::unique_ptr<model::CausalLm> lora_model(uint64_t seed, const model::LoraSpec& spec) {
  auto model = model::CausalLm::init_random(tiny_model_config(), seed);
  model->add_lora(spec, seed + 100);
  return model;
}

// B = 0 makes A's gradient zero; tests of A's gradient start from random Bs.
void randomise_b(model::CausalLm& model, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : model.named_parameters()) {
    if (name.find("lora_B") != std::string::npos) tensor.normal_(0.0, 0.05, generator);
  }
}

std::map<std::string, at::Tensor> by_name(const std::vector<std::pair<std::string, at::Tensor>>& named) {
  return {named.begin(), named.end()};
}

// "model.layers.1.mlp.up_proj.weight" for layer 1's up_proj.
std::string base_weight_name(int64_t layer, model::LoraTarget target) {
  const std::string key = model::lora_key(layer, target, 'A');  // base_model.model.<module>.lora_A.weight
  const std::string module = key.substr(std::string("base_model.model.").size());
  return module.substr(0, module.size() - std::string("lora_A.weight").size()) + "weight";
}

sdk::ConfigValues sft_values() {
  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  return sdk::ConfigValues::defaults_of(schema, "module");
}

// The SFT plugin's step on `model` through the core's update step, as the trainer runs it.
struct CoreStep {
  explicit CoreStep(model::CausalLm& policy, const std::vector<Pair>& pairs)
      : model(policy),
        parameters(testing::parameters_of(policy)),
        communicator(dist::make_single_process_communicator()),
        grad_sync(parameters, *communicator, 1 << 20),
        values(sft_values()),
        context(policy, tokenizer, values, *communicator, sdk::RunInfo{0, kMaxLength, 0, 0, ""}) {
    for (size_t i = 0; i < pairs.size(); ++i) {
      examples.push_back({static_cast<int64_t>(i), "test:" + std::to_string(i + 1),
                          nlohmann::json{{"prompt", pairs[i].prompt}, {"completion", pairs[i].completion}}});
    }
    for (const auto& example : examples) pointers.push_back(&example);
    module.setup(context);
  }

  std::vector<at::Tensor> gradients(const sdk::MicrobatchPlan& plan) {
    metrics::MetricReducer reducer(train::step_metric_specs(module));
    const train::GradientResult result = train::accumulate_gradients(
        {module, "test", context, parameters, *communicator, grad_sync}, pointers, plan, reducer);
    REQUIRE(result.has_units);
    std::vector<at::Tensor> grads;
    for (const at::Tensor& parameter : parameters) grads.push_back(parameter.grad().detach().clone());
    return grads;
  }

  model::CausalLm& model;
  std::vector<at::Tensor> parameters;
  std::unique_ptr<dist::Communicator> communicator;
  dist::GradientSynchronizer grad_sync;
  tokenizer::ByteTokenizer tokenizer;
  sdk::ConfigValues values;
  plugin::HostContext context;
  sft::SftModule module;
  std::vector<sdk::Example> examples;
  std::vector<const sdk::Example*> pointers;
};

sdk::MicrobatchPlan packed(int64_t micro_tokens) {
  sdk::MicrobatchPlan plan;
  plan.micro_tokens = micro_tokens;
  plan.packing = true;
  plan.row_tokens = kMaxLength;
  return plan;
}

at::Tensor logits_of(model::CausalLm& model) {
  const at::NoGradGuard no_grad;
  const at::Tensor ids = at::arange(3 * 11, at::kLong).remainder(259).view({3, 11});
  return model.logits(ids);
}

}  // namespace

TEST_CASE("fresh adapters start at the base model: A Kaiming-uniform, B zero, base weights frozen", "[lora]") {
  auto base = model::CausalLm::init_random(tiny_model_config(), 4);
  auto model = lora_model(4, spec_of(3, 6.0, {model::LoraTarget::kQ, model::LoraTarget::kDown}));
  CHECK(at::equal(logits_of(*model), logits_of(*base)));
  // Only the adapters train, by PEFT key, layer by layer, A before B.
  const auto named = model->named_parameters();
  REQUIRE(named.size() == 2u * 2u * static_cast<size_t>(tiny_model_config().num_layers));
  CHECK(named[0].first == "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  CHECK(named[1].first == "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  CHECK(named[2].first == "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight");
  const int64_t hidden = tiny_model_config().hidden_size;
  const int64_t intermediate = tiny_model_config().intermediate_size;
  CHECK(named[0].second.sizes() == at::IntArrayRef({3, hidden}));
  CHECK(named[3].second.sizes() == at::IntArrayRef({hidden, 3}));
  // U(−1/√in, 1/√in) with in = intermediate_size for down_proj's A.
  CHECK(named[2].second.abs().max().item<double>() <= 1.0 / std::sqrt(static_cast<double>(intermediate)));
  CHECK(named[2].second.abs().max().item<double>() > 0.5 / std::sqrt(static_cast<double>(intermediate)));
  for (const auto& [name, tensor] : named) {
    CHECK(tensor.requires_grad());
    if (name.find("lora_B") != std::string::npos) CHECK(tensor.abs().sum().item<double>() == 0.0);
  }
  for (const auto& [name, tensor] : model->base_parameters()) CHECK_FALSE(tensor.requires_grad());
}

TEST_CASE("one SGD step from B = 0 moves B to -lr (alpha/r) dL/dW A^T and leaves A", "[lora]") {
  const std::vector<Pair> pairs = batch_pairs();
  const model::LoraSpec spec = spec_of(3, 6.0);
  auto model = lora_model(5, spec);
  std::map<std::string, at::Tensor> initial;
  for (const auto& [name, tensor] : model->named_parameters()) initial[name] = tensor.detach().clone();

  CoreStep step(*model, pairs);
  step.gradients({3, 0});
  config::OptimSection sgd;
  sgd.name = config::OptimizerKind::kSgd;
  sgd.lr = 0.5;
  train::ParameterOptimizer optimizer(sgd, model->named_parameters());
  optimizer.step(sgd.lr);

  // ∂L/∂W of the plain model: at B = 0 the LoRA model computes the same function.
  auto plain = model::CausalLm::init_random(tiny_model_config(), 5);
  sdk::AggregationSpec token_mean;
  const auto plain_grads = testing::reference_sft_gradients(*plain, pairs, token_mean, kMaxLength);
  std::map<std::string, at::Tensor> grad_of;
  const auto plain_named = plain->named_parameters();
  for (size_t i = 0; i < plain_named.size(); ++i) grad_of[plain_named[i].first] = plain_grads[i];

  const auto trained = by_name(model->named_parameters());
  for (int64_t layer = 0; layer < tiny_model_config().num_layers; ++layer) {
    for (const model::LoraTarget target : spec.targets) {
      const std::string a_key = model::lora_key(layer, target, 'A');
      const std::string b_key = model::lora_key(layer, target, 'B');
      INFO(b_key);
      const at::Tensor expected_b =
          -sgd.lr * spec.scale() * at::mm(grad_of.at(base_weight_name(layer, target)), initial.at(a_key).t());
      CHECK(relative_error({trained.at(b_key).detach()}, {expected_b}) <= 1e-5);
      CHECK(at::equal(trained.at(a_key).detach(), initial.at(a_key)));
    }
  }
  for (const auto& [name, tensor] : model->base_parameters()) CHECK_FALSE(tensor.grad().defined());
}

TEST_CASE("the adapters' gradient is the same for every split, packed, and with activation checkpointing",
          "[lora][invariance]") {
  const std::vector<Pair> pairs = batch_pairs();
  auto model = lora_model(
      6,
      spec_of(4, 8.0, {model::LoraTarget::kQ, model::LoraTarget::kV, model::LoraTarget::kO, model::LoraTarget::kUp}));
  randomise_b(*model, 61);
  const auto reference = testing::reference_sft_gradients(*model, pairs, sdk::AggregationSpec{}, kMaxLength);
  CoreStep step(*model, pairs);
  struct Split {
    const char* name;
    sdk::MicrobatchPlan plan;
  };
  for (const Split& split : std::vector<Split>{
           {"8x1", {8, 0}}, {"1x8", {1, 0}}, {"3+3+2", {3, 0}}, {"tokens<=30", {0, 30}}, {"packed", packed(80)}}) {
    INFO("split " << split.name);
    const double error = relative_error(step.gradients(split.plan), reference);
    CHECK(error <= 1e-5);
  }
  ptrain::model::apply_activation_checkpointing(*model, true);
  CHECK(relative_error(step.gradients({3, 0}), reference) <= 1e-5);
  // A's gradient is not trivially zero (B is random).
  CHECK(step.parameters[0].grad().abs().sum().item<double>() > 0.0);
}

TEST_CASE("activation checkpointing recomputes the same adapter dropout masks", "[lora]") {
  model::LoraSpec spec = spec_of(2, 4.0);
  spec.dropout = 0.3;
  auto plain_run = lora_model(8, spec);
  auto checkpointed = lora_model(8, spec);
  randomise_b(*plain_run, 81);
  randomise_b(*checkpointed, 81);
  ptrain::model::apply_activation_checkpointing(*checkpointed, true);
  const std::vector<Pair> pairs = batch_pairs();
  const auto plain_grads = CoreStep(*plain_run, pairs).gradients({4, 0});
  const auto checkpointed_grads = CoreStep(*checkpointed, pairs).gradients({4, 0});
  CHECK(relative_error(checkpointed_grads, plain_grads) <= 1e-5);
  // Dropout is on while training (it changes the gradient) and off without gradients.
  spec.dropout = 0.0;
  auto no_dropout = lora_model(8, spec);
  randomise_b(*no_dropout, 81);
  CHECK(relative_error(CoreStep(*no_dropout, pairs).gradients({4, 0}), plain_grads) > 1e-3);
  CHECK(at::equal(logits_of(*no_dropout), logits_of(*plain_run)));
}

TEST_CASE("merged weights are W + (alpha/r) B A and give the adapted model's logits", "[lora]") {
  const model::LoraSpec spec = spec_of(3, 5.0, {model::LoraTarget::kK, model::LoraTarget::kGate});
  auto model = lora_model(9, spec);
  randomise_b(*model, 91);
  const auto merged = model->merged_copy();
  CHECK_FALSE(merged->lora().has_value());
  const auto adapters = by_name(model->named_parameters());
  const auto base = by_name(model->base_parameters());
  const auto merged_weights = by_name(merged->named_parameters());
  for (const auto& [name, weight] : base) {
    INFO(name);
    at::Tensor expected = weight.detach();
    for (int64_t layer = 0; layer < tiny_model_config().num_layers; ++layer) {
      for (const model::LoraTarget target : spec.targets) {
        if (base_weight_name(layer, target) != name) continue;
        expected = expected + spec.scale() * at::mm(adapters.at(model::lora_key(layer, target, 'B')).detach(),
                                                    adapters.at(model::lora_key(layer, target, 'A')).detach());
      }
    }
    CHECK(at::allclose(merged_weights.at(name), expected, 1e-6, 1e-7));
  }
  CHECK(relative_error({logits_of(*merged)}, {logits_of(*model)}) <= 1e-5);
}

// PEFT's use_rslora (peft/tuners/lora/layer.py, update_layer): scaling =
// lora_alpha / math.sqrt(r) instead of lora_alpha / r.
TEST_CASE("rsLoRA scales the update by alpha / sqrt(r), and its adapter directory says so", "[lora]") {
  const testing::TempDir dir("lora_rslora");
  model::LoraSpec spec = spec_of(4, 6.0, {model::LoraTarget::kV, model::LoraTarget::kDown});
  spec.use_rslora = true;
  auto model = lora_model(14, spec);
  randomise_b(*model, 141);
  const auto merged = model->merged_copy();
  const auto adapters = by_name(model->named_parameters());
  const auto base = by_name(model->base_parameters());
  const auto merged_weights = by_name(merged->named_parameters());
  const double scaling = 6.0 / 2.0;  // lora_alpha / sqrt(r) = 6 / sqrt(4)
  for (const model::LoraTarget target : spec.targets) {
    const std::string name = base_weight_name(1, target);
    INFO(name);
    const at::Tensor expected =
        base.at(name).detach() + scaling * at::mm(adapters.at(model::lora_key(1, target, 'B')).detach(),
                                                  adapters.at(model::lora_key(1, target, 'A')).detach());
    CHECK(at::allclose(merged_weights.at(name), expected, 1e-6, 1e-7));
  }
  CHECK(relative_error({logits_of(*merged)}, {logits_of(*model)}) <= 1e-5);

  model::save_lora_adapter_dir(*model, dir.path() / "adapter", at::kFloat);
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(dir.path() / "adapter" / "adapter_config.json"));
  CHECK(config.at("use_rslora") == true);
  auto reloaded = lora_model(14, spec);
  model::load_lora_adapter_dir(*reloaded, dir.path() / "adapter");
  CHECK(at::equal(logits_of(*reloaded), logits_of(*model)));
  // A run without rsLoRA would scale the same adapter by alpha / r: refused.
  auto plain = lora_model(14, spec_of(4, 6.0, {model::LoraTarget::kV, model::LoraTarget::kDown}));
  CHECK(testing::contains(testing::error_of([&] { model::load_lora_adapter_dir(*plain, dir.path() / "adapter"); }),
                          "adapter_config.json: use_rslora = true, but lora.use_rslora = false"));
}

// Every key PEFT 0.21 writes (LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"],
// task_type="CAUSAL_LM").to_dict()), the options ptrain refuses set to their off values.
TEST_CASE("an adapter_config.json as PEFT writes it, every option off, loads", "[lora]") {
  const testing::TempDir dir("lora_peft_config");
  auto saved = lora_model(15, spec_of(2, 4.0, {model::LoraTarget::kQ}));
  randomise_b(*saved, 151);
  model::save_lora_adapter_dir(*saved, dir.path() / "adapter", at::kFloat);
  std::ofstream(dir.path() / "adapter" / "adapter_config.json") << R"({"task_type": "CAUSAL_LM", "peft_type": "LORA",
    "auto_mapping": null, "peft_version": "0.21.2", "base_model_name_or_path": null, "revision": null,
    "inference_mode": false, "r": 2, "target_modules": ["q_proj"], "exclude_modules": null, "lora_alpha": 4,
    "lora_dropout": 0.0, "fan_in_fan_out": false, "bias": "none", "use_rslora": false, "modules_to_save": null,
    "init_lora_weights": true, "layers_to_transform": null, "layers_pattern": null, "rank_pattern": {},
    "alpha_pattern": {}, "megatron_config": null, "megatron_core": "megatron.core", "trainable_token_indices": null,
    "loftq_config": {}, "eva_config": null, "corda_config": null, "lora_ga_config": null, "use_dora": false,
    "velora_config": null, "alora_invocation_tokens": null, "use_qalora": false, "qalora_group_size": 16,
    "monteclora_config": null, "layer_replication": null, "lora_bias": false, "target_parameters": null,
    "use_bdlora": null, "arrow_config": null, "kasa_config": null, "ensure_weight_tying": false})";
  auto reloaded = lora_model(15, spec_of(2, 4.0, {model::LoraTarget::kQ}));
  model::load_lora_adapter_dir(*reloaded, dir.path() / "adapter");
  CHECK(at::equal(logits_of(*reloaded), logits_of(*saved)));
}

TEST_CASE("a PEFT adapter directory saves and loads to the same logits", "[lora]") {
  const testing::TempDir dir("lora_save");
  const model::LoraSpec spec = spec_of(2, 4.0, {model::LoraTarget::kQ, model::LoraTarget::kV});
  auto model = lora_model(10, spec);
  randomise_b(*model, 101);
  model::save_lora_adapter_dir(*model, dir.path() / "adapter", at::kFloat);

  std::ifstream config_file(dir.path() / "adapter" / "adapter_config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  CHECK(config.at("peft_type") == "LORA");
  CHECK(config.at("task_type") == "CAUSAL_LM");
  CHECK(config.at("r") == 2);
  CHECK(config.at("lora_alpha") == 4.0);
  CHECK(config.at("bias") == "none");
  CHECK(config.at("target_modules") == nlohmann::json{"q_proj", "v_proj"});
  const auto stored = by_name(model::read_safetensors(dir.path() / "adapter" / "adapter_model.safetensors"));
  const auto& c = tiny_model_config();
  CHECK(stored.at("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").sizes() ==
        at::IntArrayRef({2, c.hidden_size}));
  CHECK(stored.at("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight").sizes() ==
        at::IntArrayRef({c.num_kv_heads * c.resolved_head_dim(), 2}));
  CHECK(stored.size() == 8u);

  auto reloaded = lora_model(10, spec);  // the same base; B = 0 until the load
  CHECK_FALSE(at::equal(logits_of(*reloaded), logits_of(*model)));
  model::load_lora_adapter_dir(*reloaded, dir.path() / "adapter");
  CHECK(at::equal(logits_of(*reloaded), logits_of(*model)));
}

TEST_CASE("an adapter directory that does not fit the model is refused naming the file and the value", "[lora]") {
  const testing::TempDir dir("lora_bad_adapter");
  auto saved = lora_model(12, spec_of(2, 4.0, {model::LoraTarget::kQ}));
  model::save_lora_adapter_dir(*saved, dir.path() / "r2", at::kFloat);
  const std::string config_path = (dir.path() / "r2" / "adapter_config.json").string();

  auto other_rank = lora_model(12, spec_of(3, 4.0, {model::LoraTarget::kQ}));
  CHECK(testing::contains(testing::error_of([&] { model::load_lora_adapter_dir(*other_rank, dir.path() / "r2"); }),
                          config_path + ": r = 2, but lora.rank = 3"));
  auto other_alpha = lora_model(12, spec_of(2, 8.0, {model::LoraTarget::kQ}));
  CHECK(testing::contains(testing::error_of([&] { model::load_lora_adapter_dir(*other_alpha, dir.path() / "r2"); }),
                          "lora_alpha = 4.0, but lora.alpha = 8.0"));
  auto other_targets = lora_model(12, spec_of(2, 4.0, {model::LoraTarget::kQ, model::LoraTarget::kV}));
  CHECK(testing::contains(testing::error_of([&] { model::load_lora_adapter_dir(*other_targets, dir.path() / "r2"); }),
                          "target_modules = [q_proj], but lora.target_modules = [q_proj, v_proj]"));

  // A tensor of the wrong shape names the tensor.
  auto wrong = by_name(saved->named_parameters());
  const std::string key = model::lora_key(1, model::LoraTarget::kQ, 'B');
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, tensor] : saved->named_parameters()) {
    tensors.emplace_back(name, name == key ? at::zeros({5, 2}) : tensor.detach());
  }
  model::write_safetensors(dir.path() / "r2" / "adapter_model.safetensors", tensors);
  CHECK(testing::contains(testing::error_of([&] { model::load_lora_adapter_dir(*saved, dir.path() / "r2"); }),
                          "tensor '" + key + "' has shape [5, 2], expected [" +
                              std::to_string(tiny_model_config().num_heads * tiny_model_config().resolved_head_dim()) +
                              ", 2]"));
  CHECK(testing::contains(testing::error_of([&] { model::load_lora_adapter_dir(*saved, dir.path() / "none"); }),
                          "LoRA adapter directory does not exist"));
  CHECK_THROWS(saved->add_lora(spec_of(2, 4.0), 0));  // once per model
}

TEST_CASE("a LoRA policy's reference is its base weights with the adapters off, not a copy", "[lora]") {
  const testing::TempDir dir("lora_reference");
  model::CausalLm::init_random(tiny_model_config(), 13)->save_hf_dir(dir.path() / "base");
  auto policy = model::CausalLm::load_hf_dir(dir.path() / "base");
  policy->add_lora(spec_of(2, 4.0), 1);
  randomise_b(*policy, 131);
  tokenizer::ByteTokenizer tokenizer;
  auto communicator = dist::make_single_process_communicator();
  const sdk::ConfigValues values = sft_values();
  plugin::HostContext context(*policy, tokenizer, values, *communicator, sdk::RunInfo{});

  auto reference = context.load_frozen_model((dir.path() / "base").string());
  auto* reference_model = dynamic_cast<model::CausalLm*>(reference.get());
  REQUIRE(reference_model != nullptr);
  CHECK_FALSE(reference_model->lora().has_value());
  auto plain = model::CausalLm::load_hf_dir(dir.path() / "base");
  CHECK(at::equal(logits_of(*reference_model), logits_of(*plain)));
  CHECK_FALSE(at::equal(logits_of(*reference_model), logits_of(*policy)));
  // The same storage: no second copy of the weights.
  const auto shared = reference_model->base_parameters();
  const auto own = policy->base_parameters();
  for (size_t i = 0; i < own.size(); ++i) CHECK(shared[i].second.data_ptr() == own[i].second.data_ptr());
  // A frozen copy of the policy shares them too, and copies only the adapters.
  const auto copy = policy->frozen_copy();
  CHECK(copy->base_parameters()[0].second.data_ptr() == own[0].second.data_ptr());
  CHECK(copy->named_parameters()[1].second.data_ptr() != policy->named_parameters()[1].second.data_ptr());
  CHECK(at::equal(logits_of(*copy), logits_of(*policy)));
  // Blending into a model that shares the policy's weights would change the policy.
  CHECK(testing::contains(testing::error_of([&] { reference_model->soft_update_from(*policy, 0.5); }),
                          "not supported with LoRA adapters"));
}

TEST_CASE("generation with the KV cache runs through the adapters", "[lora]") {
  auto model = lora_model(14, spec_of(2, 4.0, {model::LoraTarget::kV, model::LoraTarget::kO, model::LoraTarget::kUp}));
  randomise_b(*model, 141);
  // The merged model computes the adapted function without adapters: the reference.
  const auto merged = model->merged_copy();
  const std::vector<int64_t> tokens{3, 17, 200, 42, 9, 77, 5, 130};
  const int64_t prompt = 5;
  model::CausalLm::KvCache cache = model->new_kv_cache(1, static_cast<int64_t>(tokens.size()));
  const at::Tensor ids = at::tensor(tokens, at::kLong).unsqueeze(0);  // [1, 8]
  at::Tensor step_logits = model->decode_step(ids.narrow(1, 0, prompt), at::arange(prompt, at::kLong).unsqueeze(0),
                                              at::ones({1, prompt}, at::kBool), cache);
  const at::Tensor full = [&] {
    const at::NoGradGuard no_grad;
    return merged->logits(ids);  // [1, 8, V]
  }();
  for (int64_t t = prompt; t <= static_cast<int64_t>(tokens.size()); ++t) {
    INFO("after " << t << " tokens");
    CHECK(at::allclose(step_logits[0], full[0][t - 1], 1e-4, 1e-5));
    if (t == static_cast<int64_t>(tokens.size())) break;
    step_logits =
        model->decode_step(ids.narrow(1, t, 1), at::full({1, 1}, t, at::kLong), at::ones({1, 1}, at::kBool), cache);
  }
}

TEST_CASE("sharding full's layer shards refuse a model with LoRA adapters", "[lora][sharding]") {
  // Only the adapters take gradients: sharding them would leave the frozen base whole on every rank.
  auto model = lora_model(4, spec_of(2, 4.0));
  const auto communicator = dist::make_single_process_communicator();
  shard::LayerCollectives collectives(*communicator);
  CHECK_THROWS_WITH(shard::ShardedLayers(*model, collectives), Catch::Contains("LoRA"));
  // Nothing was released: the model still runs whole.
  for (size_t i = 0; i < model->num_layers(); ++i) {
    for (const at::Tensor& parameter : model->layer_parameters(i)) CHECK(parameter.numel() > 0);
  }
}
