// DPO's split invariance (DESIGN.md §2): one step on the same global batch of
// 8 pairs with micro sizes 1, 2, 4 (8, 4 and 2 accumulation steps) and 8,
// and packed rows under three token budgets, gives the gradient and loss of
// the full-batch reference computed from the formulas (dpo_test_support.h),
// within 1e-5 relative, for sigmoid, ipo and
// simpo, with and without the sft term (normalised by the global batch's
// chosen tokens). World size 1 here; the multi-process test reuses the same
// reference.
#include "catch.h"

#include "core/plugin/host_context.h"
#include "dpo_module.h"
#include "dpo_test_support.h"
#include "support/run_command.h"

#include <ATen/ATen.h>

#include <filesystem>

namespace {

using namespace ptrain;
namespace fs = std::filesystem;

struct Case {
  const char* loss;
  dpo_test::ReferenceLoss reference_loss;
  double beta;
  bool uses_reference;
};

}  // namespace

TEST_CASE("the DPO step gradient equals the full-batch reference for every split", "[dpo][invariance]") {
  const auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 7);
  const std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  const fs::path reference_dir = testing::fresh_test_dir("dpo_invariance_reference");
  model::CausalLm::init_random(testing::tiny_model_config(), 8)->save_hf_dir(reference_dir);
  const auto reference = model::CausalLm::load_hf_dir(reference_dir);

  const tokenizer::ByteTokenizer tokenizer;
  const std::vector<dpo_test::PreferencePair> pairs = dpo_test::global_batch_pairs();
  const std::vector<sdk::Example> examples = dpo_test::to_examples(pairs);
  const std::vector<const sdk::Example*> example_pointers = dpo_test::pointers_to(examples);
  auto communicator = dist::make_single_process_communicator();

  const std::vector<Case> cases{{"sigmoid", dpo_test::ReferenceLoss::kSigmoid, 0.1, true},
                                {"ipo", dpo_test::ReferenceLoss::kIpo, 0.1, true},
                                {"simpo", dpo_test::ReferenceLoss::kSimpo, 2.0, false}};
  for (const Case& c : cases) {
    for (const double sft_weight : {0.0, 0.3}) {
      DYNAMIC_SECTION("loss " << c.loss << (sft_weight > 0 ? " + sft" : "")) {
        const auto loss = sft_weight > 0 ? std::vector<std::string>{c.loss, "sft"} : std::vector<std::string>{c.loss};
        const auto weights = sft_weight > 0 ? std::vector<double>{1.0, 0.3} : std::vector<double>{};
        const sdk::ConfigValues values = dpo_test::dpo_values({{"loss", loss},
                                                               {"loss_weights", weights},
                                                               {"beta", c.beta},
                                                               {"gamma", 0.5},
                                                               {"reference_model", reference_dir.string()}});
        plugin::HostContext context(*policy, tokenizer, values, *communicator,
                                    sdk::RunInfo{0, dpo_test::kMaxLength, 0, 0, ""});
        dpo::DpoModule module;
        module.setup(context);
        module.prepare_dataset(context, examples);

        dpo_test::clear_gradients(parameters);
        dpo_test::ReferenceSpec spec;
        spec.loss = c.reference_loss;
        spec.beta = c.beta;
        spec.gamma = 0.5;
        spec.sft_weight = sft_weight;
        const at::Tensor reference_loss =
            dpo_test::reference_step_loss(*policy, c.uses_reference ? reference.get() : nullptr, pairs, spec);
        reference_loss.backward();
        const std::vector<at::Tensor> reference_grads = dpo_test::gradients_of(parameters);

        for (const int64_t micro_size : {1, 2, 4, 8}) {
          INFO("micro_size " << micro_size << " (" << 8 / micro_size << " accumulation steps)");
          const dpo_test::StepOutcome outcome =
              dpo_test::run_step(module, context, example_pointers, {micro_size, 0}, parameters, *communicator);
          REQUIRE(outcome.gradient.has_units);
          CHECK(outcome.gradient.num_microbatches == 8 / micro_size);
          CHECK(outcome.gradient.global_units[0] == 8);
          const double error = dpo_test::relative_error(outcome.grads, reference_grads);
          INFO("relative gradient error " << error);
          CHECK(error <= 1e-5);
          CHECK(outcome.metrics.at("core/loss") == Approx(reference_loss.item<double>()).epsilon(1e-5));
        }
        // Packed rows (each pair's two sides in one row, several pairs per
        // row) under token budgets from one pair per microbatch to all.
        for (const int64_t budget : {2 * dpo_test::kMaxLength, 3 * dpo_test::kMaxLength, 20 * dpo_test::kMaxLength}) {
          INFO("packed, micro_tokens " << budget);
          sdk::MicrobatchPlan plan{0, budget};
          plan.packing = true;
          plan.row_tokens = dpo_test::kMaxLength;
          const dpo_test::StepOutcome outcome =
              dpo_test::run_step(module, context, example_pointers, plan, parameters, *communicator);
          REQUIRE(outcome.gradient.has_units);
          CHECK(outcome.gradient.global_units[0] == 8);
          const double error = dpo_test::relative_error(outcome.grads, reference_grads);
          INFO("relative gradient error " << error << ", " << outcome.gradient.num_microbatches << " microbatches");
          CHECK(error <= 1e-5);
          CHECK(outcome.metrics.at("core/loss") == Approx(reference_loss.item<double>()).epsilon(1e-5));
        }
      }
    }
  }
}

TEST_CASE("with loss_agg = token, pairs weigh by their tokens and the split still does not matter",
          "[dpo][invariance]") {
  const auto policy = model::CausalLm::init_random(testing::tiny_model_config(), 9);
  const std::vector<at::Tensor> parameters = dpo_test::parameters_of(*policy);
  const tokenizer::ByteTokenizer tokenizer;
  const std::vector<dpo_test::PreferencePair> pairs = dpo_test::global_batch_pairs();
  const std::vector<sdk::Example> examples = dpo_test::to_examples(pairs);
  auto communicator = dist::make_single_process_communicator();
  const sdk::ConfigValues values =
      dpo_test::dpo_values({{"loss", std::vector<std::string>{"simpo"}}, {"beta", 2.0}, {"loss_agg", std::string("token")}});
  plugin::HostContext context(*policy, tokenizer, values, *communicator,
                              sdk::RunInfo{0, dpo_test::kMaxLength, 0, 0, ""});
  dpo::DpoModule module;
  module.setup(context);

  // Reference: Σ_i (|y_c| + |y_r|)·ℓ_i / Σ_i (|y_c| + |y_r|) from the formula.
  dpo_test::clear_gradients(parameters);
  at::Tensor weighted = at::zeros({}, at::kDouble);
  int64_t tokens = 0;
  for (const dpo_test::PreferencePair& pair : pairs) {
    const dpo_test::ReferenceSequences seq =
        dpo_test::reference_sequences(pair, dpo_test::kMaxLength, dpo_test::kMaxLength / 2);
    const auto n_c = static_cast<double>(seq.chosen.size());
    const auto n_r = static_cast<double>(seq.rejected.size());
    const at::Tensor u = 2.0 * (dpo_test::reference_sequence_log_prob(*policy, seq.prompt, seq.chosen) / n_c -
                                dpo_test::reference_sequence_log_prob(*policy, seq.prompt, seq.rejected) / n_r) -
                         0.5;
    weighted = weighted - (n_c + n_r) * at::log_sigmoid(u);
    tokens += static_cast<int64_t>(n_c + n_r);
  }
  const at::Tensor reference_loss = weighted / static_cast<double>(tokens);
  reference_loss.backward();
  const std::vector<at::Tensor> reference_grads = dpo_test::gradients_of(parameters);

  for (const sdk::MicrobatchPlan plan :
       {sdk::MicrobatchPlan{1, 0}, sdk::MicrobatchPlan{3, 0}, sdk::MicrobatchPlan{8, 0}, sdk::MicrobatchPlan{0, 120}}) {
    INFO("micro_size " << plan.micro_size << ", micro_tokens " << plan.micro_tokens);
    const dpo_test::StepOutcome outcome =
        dpo_test::run_step(module, context, dpo_test::pointers_to(examples), plan, parameters, *communicator);
    CHECK(outcome.gradient.global_units[0] == tokens);
    CHECK(dpo_test::relative_error(outcome.grads, reference_grads) <= 1e-5);
    CHECK(outcome.metrics.at("core/loss") == Approx(reference_loss.item<double>()).epsilon(1e-5));
  }
}
