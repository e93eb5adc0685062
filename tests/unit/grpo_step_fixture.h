// A GRPO module on the injected rollouts of grpo_test_support.h, and the
// checks the option tests share: one step (or the second update of
// num_iterations = 2) at micro sizes 1, 2, 4 and 12 gives the gradient and
// loss of the independent full-batch reference.
#pragma once

#include "grpo_test_support.h"

#include "dpo_test_support.h"

#include "core/plugin/host_context.h"
#include "grpo_module.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace ptrain::grpo_step {

struct Fixture {
  explicit Fixture(std::vector<grpo_test::Prompt> batch, uint64_t model_seed = 41)
      : policy(model::CausalLm::init_random(testing::tiny_model_config(), model_seed)),
        parameters(dpo_test::parameters_of(*policy)),
        prompts(std::move(batch)),
        examples(grpo_test::to_examples(prompts)),
        pointers(dpo_test::pointers_to(examples)) {}

  std::unique_ptr<model::CausalLm> policy;
  std::vector<at::Tensor> parameters;
  tokenizer::ByteTokenizer tokenizer;
  std::vector<grpo_test::Prompt> prompts;
  std::vector<sdk::Example> examples;
  std::vector<const sdk::Example*> pointers;
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
};

// One GRPO module on fixed rollouts, set up from `values` (which must outlive it).
struct Run {
  Run(Fixture& f, const sdk::ConfigValues& values)
      : host(*f.policy, f.tokenizer, values, *f.communicator, sdk::RunInfo{0, grpo_test::kMaxLength, 0, 0, ""}),
        engine(f.prompts),
        context(host, engine) {
    module.setup(context);
  }
  plugin::HostContext host;
  grpo_test::FixedRolloutEngine engine;
  grpo_test::InjectedContext context;
  grpo::GrpoModule module;
};

inline at::Tensor expected_gradient(Fixture& f, const grpo_test::ReferenceSpec& spec, std::vector<at::Tensor>& gradient,
                                    model::CausalLm* old_policy = nullptr) {
  dpo_test::clear_gradients(f.parameters);
  const at::Tensor loss = grpo_test::reference_step_loss(*f.policy, old_policy, nullptr, f.prompts, spec);
  loss.backward();
  gradient = dpo_test::gradients_of(f.parameters);
  return loss.detach();
}

// The step at micro sizes 1, 2, 4 and 12 gives the reference gradient and loss.
inline void check_every_split(Fixture& f, Run& run, const at::Tensor& expected_loss,
                              const std::vector<at::Tensor>& expected, int64_t expected_units) {
  for (const int64_t micro_size : {1, 2, 4, 12}) {
    INFO("micro_size " << micro_size);
    const dpo_test::StepOutcome outcome =
        dpo_test::run_step(run.module, run.context, f.pointers, {micro_size, 0}, f.parameters, *f.communicator);
    REQUIRE(outcome.gradient.has_units);
    CHECK(outcome.gradient.global_units[0] == expected_units);
    const double error = testing::relative_error(outcome.grads, expected);
    INFO("relative gradient error " << error);
    CHECK(error <= 1e-5);
    CHECK(outcome.metrics.at("core/loss") == Approx(expected_loss.item<double>()).epsilon(1e-5).margin(1e-9));
  }
}

// The second update of num_iterations = 2 (no new prompts: the stored
// rollouts and old log-probs) at micro sizes 1, 2, 4 and 12 gives the
// reference gradient and loss, without generating again.
inline void check_second_update_every_split(Fixture& f, Run& run, const at::Tensor& expected_loss,
                                            const std::vector<at::Tensor>& expected) {
  for (const int64_t micro_size : {1, 2, 4, 12}) {
    INFO("micro_size " << micro_size);
    const dpo_test::StepOutcome second =
        dpo_test::run_step(run.module, run.context, {}, {micro_size, 0}, f.parameters, *f.communicator);
    const double error = testing::relative_error(second.grads, expected);
    INFO("relative gradient error " << error);
    CHECK(error <= 1e-5);
    CHECK(second.metrics.at("core/loss") == Approx(expected_loss.item<double>()).epsilon(1e-5));
  }
  CHECK(run.engine.calls == 1);
}

// Tokens of a completion of the injected table: its bytes and <eos> unless truncated.
inline int64_t tokens_of(const std::vector<std::string>& texts) {
  int64_t tokens = 0;
  for (const std::string& text : texts) tokens += static_cast<int64_t>(grpo_test::completion_ids(text).size());
  return tokens;
}

}  // namespace ptrain::grpo_step
