// The framework's first promise (docs/architecture.md#the-update-step): a step's gradient does not
// depend on how its global batch is split. The reference is computed here
// from the formula, one unpadded sequence at a time through the full-vocabulary
// log_softmax, not through the code under test's collate or log-prob path.
#include "catch.h"

#include "support/test_util.h"

#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/model/causal_lm.h"
#include "core/model/model_transforms.h"
#include "core/plugin/host_context.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/optimizer.h"
#include "core/train/update_step.h"
#include "sft_module.h"
#include "support/sft_reference.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <map>
#include <string>
#include <vector>

namespace {

using namespace ptrain;
using testing::parameters_of;

constexpr int64_t kMaxLength = 40;

using Pair = testing::PromptCompletion;
using testing::tiny_model_config;

// Very different lengths; the last prompt alone exceeds max_length, so that
// example keeps no trainable token after truncation.
std::vector<Pair> global_batch_pairs() {
  return {{"1+1=", "2"},
          {"a much longer prompt about something=", "ok"},
          {"q", "a long completion with many bytes"},
          {"héllo wörld ", "ünïcode"},
          {"3*7=", "21"},
          {"x", ""},
          {"medium prompt=", "medium answer"},
          {std::string(60, 'p'), "never seen"}};
}

std::vector<sdk::Example> to_examples(const std::vector<Pair>& pairs) {
  std::vector<sdk::Example> examples;
  for (size_t i = 0; i < pairs.size(); ++i) {
    examples.push_back({static_cast<int64_t>(i), "test:" + std::to_string(i + 1),
                        nlohmann::json{{"prompt", pairs[i].prompt}, {"completion", pairs[i].completion}}});
  }
  return examples;
}

at::Tensor reference_step_loss(model::CausalLm& model, const std::vector<Pair>& pairs,
                               const sdk::AggregationSpec& spec) {
  return testing::reference_sft_step_loss(model, pairs, spec, kMaxLength);
}

std::vector<at::Tensor> gradients_of(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& parameter : parameters) grads.push_back(parameter.grad().detach().clone());
  return grads;
}

using testing::relative_error;

sdk::ConfigValues sft_values(const std::string& loss_agg) {
  sdk::ConfigSchema schema;
  sft::declare_sft_config(schema);
  sdk::ConfigValues values = sdk::ConfigValues::defaults_of(schema, "module");
  values.set("loss_agg", loss_agg, "test", true);
  return values;
}

sdk::MicrobatchPlan grouped_by_length(sdk::MicrobatchPlan plan) {
  plan.group_by_length = true;
  return plan;
}

// Documents packed into rows of max_length tokens, rows cut by a token budget.
sdk::MicrobatchPlan packed(int64_t micro_tokens) {
  sdk::MicrobatchPlan plan;
  plan.micro_tokens = micro_tokens;
  plan.packing = true;
  plan.row_tokens = kMaxLength;
  return plan;
}

// One process, the tiny model and the examples of one global batch: what
// every invariance case sets up before comparing splits.
struct SingleProcessStep {
  SingleProcessStep(uint64_t seed, const std::vector<Pair>& pairs)
      : model(model::CausalLm::init_random(tiny_model_config(), seed)),
        parameters(parameters_of(*model)),
        examples(to_examples(pairs)),
        communicator(dist::make_single_process_communicator()),
        grad_sync(parameters, *communicator, 1 << 20) {
    for (const auto& example : examples) example_pointers.push_back(&example);
  }

  // The step's gradient (left in the parameters' .grad) through the core's update step.
  train::GradientResult accumulate(sdk::TrainModule& module, sdk::Context& context, const sdk::MicrobatchPlan& plan,
                                   std::map<std::string, double>& reduced) {
    metrics::MetricReducer reducer(train::step_metric_specs(module));
    const train::GradientResult result = train::accumulate_gradients(
        {module, "test", context, parameters, *communicator, grad_sync}, example_pointers, plan, reducer);
    reduced = reducer.reduce(*communicator);
    return result;
  }

  plugin::HostContext context_for(const sdk::ConfigValues& values) {
    return plugin::HostContext(*model, tokenizer, values, *communicator, sdk::RunInfo{0, kMaxLength, 0, 0, ""});
  }

  std::unique_ptr<model::CausalLm> model;
  std::vector<at::Tensor> parameters;
  std::vector<sdk::Example> examples;
  std::vector<const sdk::Example*> example_pointers;
  std::unique_ptr<dist::Communicator> communicator;
  dist::GradientSynchronizer grad_sync;
  tokenizer::ByteTokenizer tokenizer;
};

// The formula's loss on the whole batch, and its gradient.
struct Reference {
  at::Tensor loss;
  std::vector<at::Tensor> grads;
};

Reference full_batch_reference(SingleProcessStep& step, const std::vector<Pair>& pairs,
                               const sdk::AggregationSpec& spec) {
  for (const at::Tensor& parameter : step.parameters) parameter.mutable_grad() = at::Tensor();
  const at::Tensor loss = reference_step_loss(*step.model, pairs, spec);
  loss.backward();
  return {loss, gradients_of(step.parameters)};
}

}  // namespace

TEST_CASE("the step gradient is the same for every split of the global batch, in every aggregation mode",
          "[invariance]") {
  const std::vector<Pair> pairs = global_batch_pairs();
  SingleProcessStep step(7, pairs);

  for (const std::string& mode_name : sdk::loss_aggregation_names()) {
    DYNAMIC_SECTION("loss_agg = " << mode_name) {
      const sdk::ConfigValues values = sft_values(mode_name);
      plugin::HostContext context = step.context_for(values);
      sft::SftModule module;
      module.setup(context);

      const auto [reference_loss, reference_grads] = full_batch_reference(step, pairs, module.config().aggregation);

      struct Split {
        const char* name;
        sdk::MicrobatchPlan plan;
      };
      const std::vector<Split> splits{{"8x1", {8, 0}},
                                      {"4x2", {4, 0}},
                                      {"2x4", {2, 0}},
                                      {"1x8", {1, 0}},
                                      {"3+3+2", {3, 0}},
                                      {"tokens<=80", {0, 80}},
                                      {"tokens<=30", {0, 30}},
                                      {"3+3+2 grouped by length", grouped_by_length({3, 0})},
                                      {"tokens<=80 grouped by length", grouped_by_length({0, 80})},
                                      {"packed rows of 40, one per microbatch", packed(40)},
                                      {"packed rows of 40, tokens<=80", packed(80)},
                                      {"packed rows of 40, all in one microbatch", packed(400)}};
      for (const Split& split : splits) {
        INFO("split " << split.name);
        std::map<std::string, double> reduced;
        const train::GradientResult result = step.accumulate(module, context, split.plan, reduced);
        REQUIRE(result.has_units);
        const double error = relative_error(gradients_of(step.parameters), reference_grads);
        INFO("relative gradient error " << error);
        CHECK(error <= 1e-5);
        const double loss = reduced.at("core/loss");
        CHECK(loss == Approx(reference_loss.item<double>()).epsilon(1e-5));
        // One example per microbatch; the fully truncated one is skipped
        // (counted, never trained on as zeros).
        if (split.plan.micro_size == 1) CHECK(result.num_microbatches == 7);
      }

      // Recomputing each layer in backward changes memory, not the gradient.
      ptrain::model::apply_activation_checkpointing(*step.model, true);
      std::map<std::string, double> reduced;
      step.accumulate(module, context, {3, 0}, reduced);
      ptrain::model::apply_activation_checkpointing(*step.model, false);
      const double error = relative_error(gradients_of(step.parameters), reference_grads);
      INFO("activation checkpointing: relative gradient error " << error);
      CHECK(error <= 1e-5);
    }
  }
}

TEST_CASE("a global batch without any trainable token is reported as empty, not as NaN", "[invariance]") {
  // Both prompts alone exceed max_length: nothing of either completion survives.
  SingleProcessStep step(3, {{std::string(50, 'a'), "x"}, {std::string(45, 'b'), "y"}});
  for (const std::string& mode_name : sdk::loss_aggregation_names()) {
    const sdk::ConfigValues values = sft_values(mode_name);
    plugin::HostContext context = step.context_for(values);
    sft::SftModule module;
    module.setup(context);
    std::map<std::string, double> reduced;
    const train::GradientResult result = step.accumulate(module, context, {1, 0}, reduced);
    CHECK_FALSE(result.has_units);
    CHECK(result.global_units == std::vector<int64_t>{0});
    for (const at::Tensor& parameter : step.parameters) CHECK(parameter.grad().abs().sum().item<double>() == 0.0);
  }
}

namespace {

// A loss of two terms with different units: seq_mean_token_sum over
// sequences plus token_mean NLL over tokens, built from two SFT modules.
class TwoTermModule final : public sdk::TrainModule {
 public:
  TwoTermModule() = default;
  void setup(sdk::Context& ctx) override {}
  void setup_terms(sdk::Context& main_ctx, sdk::Context& extra_ctx) {
    main_.setup(main_ctx);
    extra_.setup(extra_ctx);
  }
  std::vector<sdk::MetricSpec> metric_specs() const override { return main_.metric_specs(); }
  void check_example(const sdk::Example& example) const override { main_.check_example(example); }
  std::vector<std::unique_ptr<sdk::Microbatch>> prepare(sdk::Context& ctx,
                                                        const std::vector<const sdk::Example*>& examples,
                                                        const sdk::MicrobatchPlan& plan) override {
    return main_.prepare(ctx, examples, plan);
  }
  std::vector<sdk::LossTerm> loss_terms() const override {
    return {main_.loss_terms()[0], {"extra", extra_.loss_terms()[0].divisor}};
  }
  std::vector<int64_t> count_units(const sdk::Microbatch& microbatch) const override {
    return {main_.count_units(microbatch)[0], extra_.count_units(microbatch)[0]};
  }
  sdk::LossOut microbatch_loss(sdk::Context& ctx, const sdk::Microbatch& microbatch) override {
    sdk::LossOut out = main_.microbatch_loss(ctx, microbatch);
    out.loss_sums.push_back(extra_.microbatch_loss(ctx, microbatch).loss_sums[0]);
    return out;
  }

 private:
  sft::SftModule main_;
  sft::SftModule extra_;
};

}  // namespace

TEST_CASE("extra loss terms are normalised by their own global units under every split", "[invariance]") {
  const std::vector<Pair> pairs = global_batch_pairs();
  SingleProcessStep step(11, pairs);

  const sdk::ConfigValues main_values = sft_values("seq_mean_token_sum");
  const sdk::ConfigValues extra_values = sft_values("token_mean");
  plugin::HostContext main_context = step.context_for(main_values);
  plugin::HostContext extra_context = step.context_for(extra_values);
  TwoTermModule module;
  module.setup_terms(main_context, extra_context);

  for (const at::Tensor& parameter : step.parameters) parameter.mutable_grad() = at::Tensor();
  const at::Tensor reference_loss =
      reference_step_loss(*step.model, pairs, {sdk::LossAggregation::kSeqMeanTokenSum, 1.0}) +
      reference_step_loss(*step.model, pairs, {sdk::LossAggregation::kTokenMean, 1.0});
  reference_loss.backward();
  const std::vector<at::Tensor> reference_grads = gradients_of(step.parameters);

  for (const sdk::MicrobatchPlan plan :
       {sdk::MicrobatchPlan{8, 0}, sdk::MicrobatchPlan{3, 0}, sdk::MicrobatchPlan{1, 0}, sdk::MicrobatchPlan{0, 50}}) {
    INFO("micro_size " << plan.micro_size << ", micro_tokens " << plan.micro_tokens);
    std::map<std::string, double> reduced;
    const train::GradientResult result = step.accumulate(module, main_context, plan, reduced);
    REQUIRE(result.global_units.size() == 2);
    CHECK(result.global_units[0] == 7);  // the fully truncated example is not a unit
    const double error = relative_error(gradients_of(step.parameters), reference_grads);
    INFO("relative gradient error " << error);
    CHECK(error <= 1e-5);
    CHECK(reduced.at("core/loss") == Approx(reference_loss.item<double>()).epsilon(1e-5));
  }
}

// bf16-mixed (docs/devices.md#runtimeprecision): the model's dense and lm_head products read
// bfloat16 operands; weights, gradients, their accumulation over
// microbatches, loss sums and unit counts stay float32. Each split's step
// gradient is then the fp32 full-batch reference up to bf16 rounding. With
// oneDNN (the default build) a product's float32 result is not rounded to
// bf16, so the splits also agree with each other to float32 rounding.
#if TORCH_VERSION_MAJOR >= 2
// LibTorch 2.6 with oneDNN 3 (Debian trixie): the single-microbatch step
// differed from the other splits by 8e-5 to 1.7e-4; why is not known yet.
constexpr double kBf16SplitTolerance = 1e-3;
#else
constexpr double kBf16SplitTolerance = 1e-5;  // LibTorch 1.13, oneDNN 2.6: measured 1e-7
#endif

TEST_CASE("under bf16-mixed the step gradient of every split is the fp32 reference within bf16 rounding",
          "[invariance][precision][bf16]") {
  const std::vector<Pair> pairs = global_batch_pairs();
  SingleProcessStep step(7, pairs);

  for (const std::string& mode_name : sdk::loss_aggregation_names()) {
    DYNAMIC_SECTION("loss_agg = " << mode_name) {
      const sdk::ConfigValues values = sft_values(mode_name);
      plugin::HostContext context = step.context_for(values);
      sft::SftModule module;
      module.setup(context);

      const auto [fp32_loss, fp32_grads] = full_batch_reference(step, pairs, module.config().aggregation);

      step.model->set_compute_dtype(at::kBFloat16);
      CHECK(context.compute_dtype() == at::kBFloat16);
      std::vector<at::Tensor> one_microbatch;
      for (const sdk::MicrobatchPlan plan : {sdk::MicrobatchPlan{8, 0}, sdk::MicrobatchPlan{1, 0},
                                             sdk::MicrobatchPlan{3, 0}, sdk::MicrobatchPlan{0, 30}, packed(80)}) {
        INFO("micro_size " << plan.micro_size << ", micro_tokens " << plan.micro_tokens);
        std::map<std::string, double> reduced;
        step.accumulate(module, context, plan, reduced);
        const std::vector<at::Tensor> grads = gradients_of(step.parameters);
        const double error = relative_error(grads, fp32_grads);
        INFO("bf16-mixed vs the fp32 full-batch reference: relative gradient error " << error);
        CHECK(error > 1e-4);  // the products did run on bf16 operands
        CHECK(error <= 1e-2);
        CHECK(reduced.at("core/loss") == Approx(fp32_loss.item<double>()).epsilon(1e-2));
        if (one_microbatch.empty()) one_microbatch = grads;
#ifdef PTRAIN_HAVE_ONEDNN
        const double split_error = relative_error(grads, one_microbatch);
        INFO("vs the single-microbatch bf16-mixed step: relative gradient error " << split_error);
        CHECK(split_error <= kBf16SplitTolerance);
#endif
      }
      // Master weights, their gradients and AdamW's state stay float32.
      for (const at::Tensor& parameter : step.parameters) {
        CHECK(parameter.scalar_type() == at::kFloat);
        CHECK(parameter.grad().scalar_type() == at::kFloat);
      }
      config::OptimSection adamw;
      adamw.lr = 1e-3;
      adamw.beta1 = 0.9;
      adamw.beta2 = 0.999;
      adamw.eps = 1e-8;
      train::ParameterOptimizer optimizer(adamw, step.model->named_parameters());
      optimizer.step(adamw.lr);
      const auto state = optimizer.state_tensors();
      REQUIRE_FALSE(state.empty());
      for (const auto& [name, tensor] : state) {
        INFO(name);
        CHECK((tensor.scalar_type() == at::kFloat || name.find(".step") != std::string::npos));
      }
    }
  }
}
