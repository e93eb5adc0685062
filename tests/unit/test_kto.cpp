// The KTO plugin's pure functions against hand-computed values, and its
// KL reference point z0 against an independent computation: every
// example's mismatched pair scored one unpadded sequence at a time through
// model.logits + log_softmax, under several microbatch splits and for a
// held-out chunk.
#include "catch.h"

#include "support/scratch_dir.h"
#include "support/test_util.h"

#include "core/checkpoint/remove_tree.h"
#include "core/dist/communicator.h"
#include "core/model/causal_lm.h"
#include "core/plugin/host_context.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "core/train/global_batches.h"
#include "kto_config.h"
#include "kto_data.h"
#include "kto_loss.h"
#include "kto_module.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <filesystem>
#include <map>

namespace {

using namespace ptrain;
namespace fs = std::filesystem;

constexpr int64_t kMaxLength = 24;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

kto::KtoConfig config_of(kto::KtoLossType type, double beta, double desirable_weight, double undesirable_weight) {
  kto::KtoConfig config;
  config.loss_type = type;
  config.beta = beta;
  config.desirable_weight = desirable_weight;
  config.undesirable_weight = undesirable_weight;
  return config;
}

struct Line {
  std::string prompt;
  std::string completion;
  bool desirable;
};

// Eight examples of uneven lengths; the sixth's prompt fills max_length (not scorable).
std::vector<Line> lines() {
  return {{"1+1=", "2", true},
          {"a longer prompt=", "an answer", false},
          {"q", "a long completion here", true},
          {"3*7=", "24", false},
          {"x", "", true},
          {std::string(kMaxLength, 'p'), "lost", true},
          {"medium=", "medium!", false},
          {"9-4=", "5", true}};
}

std::vector<sdk::Example> examples_of(const std::vector<Line>& data, bool held_out) {
  std::vector<sdk::Example> examples;
  for (size_t i = 0; i < data.size(); ++i) {
    examples.push_back(
        {held_out ? -1 : static_cast<int64_t>(i), "kto.jsonl:" + std::to_string(i + 1),
         nlohmann::json{{"prompt", data[i].prompt}, {"completion", data[i].completion}, {"label", data[i].desirable}}});
  }
  return examples;
}

// <bos> prompt completion <eos>, cut at kMaxLength: the completion tokens
// kept, scored one unpadded sequence through logits + log_softmax.
double independent_log_prob(model::CausalLm& model, const std::string& prompt, const std::string& completion) {
  std::vector<int64_t> tokens{tokenizer::ByteTokenizer::kBos};
  for (const unsigned char byte : prompt) tokens.push_back(byte);
  const auto prompt_length = static_cast<int64_t>(tokens.size());
  for (const unsigned char byte : completion) tokens.push_back(byte);
  tokens.push_back(tokenizer::ByteTokenizer::kEos);
  if (static_cast<int64_t>(tokens.size()) > kMaxLength) tokens.resize(kMaxLength);
  const at::NoGradGuard no_grad;
  const at::Tensor input = at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end() - 1), at::kLong).unsqueeze(0);
  const at::Tensor log_probs = at::log_softmax(model.logits(input)[0].to(at::kDouble), -1);
  double total = 0.0;
  for (auto t = prompt_length; t < static_cast<int64_t>(tokens.size()); ++t) {
    total += log_probs[t - 1][tokens[t]].item<double>();
  }
  return total;
}

// The mean over scorable examples i of log π(y_p(i) | x_i) − log π_ref(...),
// p(i) the previous scorable example, cyclically: z0 before its clamp.
double independent_kl_mean(model::CausalLm& policy, model::CausalLm& reference, const std::vector<Line>& data) {
  std::vector<size_t> scorable;
  for (size_t i = 0; i < data.size(); ++i) {
    if (static_cast<int64_t>(data[i].prompt.size()) + 1 < kMaxLength) scorable.push_back(i);
  }
  double sum = 0.0;
  for (size_t k = 0; k < scorable.size(); ++k) {
    const Line& x = data[scorable[k]];
    const Line& partner = data[scorable[(k + scorable.size() - 1) % scorable.size()]];
    sum += independent_log_prob(policy, x.prompt, partner.completion) -
           independent_log_prob(reference, x.prompt, partner.completion);
  }
  return sum / static_cast<double>(scorable.size());
}

fs::path saved_model(const std::string& name, uint64_t seed) {
  const fs::path dir = ptrain::testing::scratch_root() / "kto" / name;
  ptrain::checkpoint::remove_tree(dir);
  fs::create_directories(dir);
  model::CausalLm::init_random(testing::tiny_model_config(), seed)->save_hf_dir(dir);
  return dir;
}

// A KTO module on a policy and a reference model of different seeds.
struct Setup {
  std::unique_ptr<model::CausalLm> policy;
  std::unique_ptr<model::CausalLm> reference;
  fs::path reference_dir;
  tokenizer::ByteTokenizer tokenizer;
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process_communicator();
  sdk::ConfigValues values{"module"};
  std::unique_ptr<plugin::HostContext> context;
  kto::KtoModule module;

  Setup(uint64_t policy_seed, uint64_t reference_seed)
      : policy(model::CausalLm::init_random(testing::tiny_model_config(), policy_seed)),
        reference(model::CausalLm::init_random(testing::tiny_model_config(), reference_seed)),
        reference_dir(saved_model("reference_" + std::to_string(reference_seed), reference_seed)) {
    sdk::ConfigSchema schema;
    kto::declare_kto_config(schema);
    values = sdk::ConfigValues::defaults_of(schema, "module");
    values.set("reference_model", reference_dir.string(), "test.toml:3", true);
    context = std::make_unique<plugin::HostContext>(*policy, tokenizer, values, *communicator,
                                                    sdk::RunInfo{0, kMaxLength, 0, 0, ""});
    module.setup(*context);
  }

  // z0 of every microbatch prepare() makes of the whole batch under `plan`.
  std::vector<double> z0s(const std::vector<sdk::Example>& examples, const sdk::GlobalBatch& batch,
                          const sdk::MicrobatchPlan& plan) {
    context->set_global_batch(batch);
    std::vector<double> values;
    for (const auto& microbatch : module.prepare(*context, train::rank_share(batch), plan)) {
      values.push_back(static_cast<const kto::KtoMicrobatch&>(*microbatch).z0.item<double>());
    }
    return values;
  }
};

}  // namespace

TEST_CASE("KTO pairs each example with the previous scorable one's completion, cyclically", "[kto]") {
  CHECK(kto::kl_partners({true, true, true, true}) == std::vector<int64_t>{3, 0, 1, 2});
  CHECK(kto::kl_partners({true, false, true, true, false}) == std::vector<int64_t>{3, -1, 0, 2, -1});
  CHECK(kto::kl_partners({false, true, false}) == std::vector<int64_t>{-1, 1, -1});  // one: its own completion
  CHECK(kto::kl_partners({false, false}) == std::vector<int64_t>{-1, -1});
  CHECK(kto::kl_partners({}).empty());
}

TEST_CASE("z0 is the mean KL log-ratio clamped at 0, and 0 without pairs", "[kto]") {
  CHECK(kto::reference_point(at::tensor({0.5, 1.5, -0.5}, at::kDouble)).item<double>() == Approx(0.5));
  CHECK(kto::reference_point(at::tensor({-0.5, 0.1}, at::kDouble)).item<double>() == 0.0);
  CHECK(kto::reference_point(at::zeros({0}, at::kDouble)).item<double>() == 0.0);
}

TEST_CASE("KTO and unpaired APO-zero losses match their closed forms, weights included", "[kto]") {
  const at::Tensor policy = at::tensor({-3.0, -5.0, -2.0}, at::kDouble);
  const at::Tensor reference = at::tensor({-4.0, -3.0, -2.5}, at::kDouble);  // r = 1, −2, 0.5
  const at::Tensor desirable = at::tensor(std::vector<uint8_t>{1, 0, 0}, at::kByte).to(at::kBool);
  const at::Tensor z0 = at::tensor(0.3, at::kDouble);

  const kto::KtoLosses kto_out =
      kto::kto_losses(policy, reference, desirable, z0, config_of(kto::KtoLossType::kKto, 0.5, 1.5, 0.75));
  CHECK(kto_out.losses[0].item<double>() == Approx(1.5 * (1.0 - sigmoid(0.5 * (1.0 - 0.3)))).epsilon(1e-12));
  CHECK(kto_out.losses[1].item<double>() == Approx(0.75 * (1.0 - sigmoid(0.5 * (0.3 + 2.0)))).epsilon(1e-12));
  CHECK(kto_out.losses[2].item<double>() == Approx(0.75 * (1.0 - sigmoid(0.5 * (0.3 - 0.5)))).epsilon(1e-12));
  CHECK(kto_out.rewards[1].item<double>() == Approx(0.5 * -2.0));

  const kto::KtoLosses apo =
      kto::kto_losses(policy, reference, desirable, z0, config_of(kto::KtoLossType::kApoZeroUnpaired, 0.5, 1.5, 0.75));
  CHECK(apo.losses[0].item<double>() == Approx(1.5 * (1.0 - sigmoid(0.5))).epsilon(1e-12));
  CHECK(apo.losses[1].item<double>() == Approx(0.75 * sigmoid(-1.0)).epsilon(1e-12));
  CHECK(apo.losses[2].item<double>() == Approx(0.75 * sigmoid(0.25)).epsilon(1e-12));

  // The gradient reaches the policy's log-probs only (z0 and the reference are constants):
  // dℓ/dr = −λ_D β σ'(β(r − z0)) for a desirable example.
  const at::Tensor trained = policy.clone().requires_grad_(true);
  kto::kto_losses(trained, reference, desirable, z0, config_of(kto::KtoLossType::kKto, 0.5, 1.5, 0.75))
      .losses.sum()
      .backward();
  const double s = sigmoid(0.5 * 0.7);
  CHECK(trained.grad()[0].item<double>() == Approx(-1.5 * 0.5 * s * (1.0 - s)).epsilon(1e-12));
}

TEST_CASE("KTO sequences score their completion tokens, cut at max_length from the end", "[kto][data]") {
  const tokenizer::ByteTokenizer tokenizer;
  const kto::KtoExample example = kto::tokenize_kto_example(tokenizer, "a=", "12", true);
  CHECK(example.prompt == std::vector<int64_t>{256, 'a', '='});
  CHECK(example.completion == std::vector<int64_t>{'1', '2', 257});
  const kto::PromptCompletion sequence{&example.prompt, &example.completion};

  const sdk::TokenBatch whole = kto::collate_sequences({sequence}, 16, tokenizer.pad_id());
  CHECK(whole.input_ids.sizes() == at::IntArrayRef{1, 5});
  CHECK(whole.target_ids[0][4].item<int64_t>() == 257);
  CHECK(at::equal(whole.loss_mask[0], at::tensor(std::vector<uint8_t>{0, 0, 1, 1, 1}, at::kByte).to(at::kBool)));
  CHECK(kto::input_length(sequence, 16) == 5);

  const sdk::TokenBatch cut = kto::collate_sequences({sequence, sequence}, 4, tokenizer.pad_id());
  CHECK(cut.input_ids.sizes() == at::IntArrayRef{2, 3});
  CHECK(at::equal(cut.loss_mask[1], at::tensor(std::vector<uint8_t>{0, 0, 1}, at::kByte).to(at::kBool)));
  CHECK(example.truncated(4));
  CHECK(example.scorable(4));
  CHECK_FALSE(example.scorable(3));  // the prompt fills it
}

TEST_CASE("KTO advises on unbalanced weights as TRL does", "[kto]") {
  const kto::KtoConfig equal = config_of(kto::KtoLossType::kKto, 0.1, 1.0, 1.0);
  CHECK(kto::weight_advice(10, 10, equal).empty());
  // 100 desirable, 300 undesirable: λ_D in [3, 3.99] or λ_U in [0.25, 0.33].
  const std::string advice = kto::weight_advice(100, 300, equal);
  CHECK_THAT(advice,
             Catch::Contains("desirable_weight in [3, 3.99]") && Catch::Contains("undesirable_weight in [0.25, 0.33]"));
  CHECK(kto::weight_advice(100, 300, config_of(kto::KtoLossType::kKto, 0.1, 3.5, 1.0)).empty());
  CHECK(kto::weight_advice(100, 300, config_of(kto::KtoLossType::kKto, 0.1, 1.0, 0.3)).empty());
}

TEST_CASE("KTO's z0 is the whole batch's, the same for every microbatch split", "[kto]") {
  const std::vector<Line> data = lines();
  // Swapping policy and reference negates the mean log-ratio, so one of the
  // two setups has a z0 above its clamp.
  for (const auto& [policy_seed, reference_seed] : {std::pair<uint64_t, uint64_t>{5, 9}, {9, 5}}) {
    DYNAMIC_SECTION("policy seed " << policy_seed) {
      Setup setup(policy_seed, reference_seed);
      const double mean = independent_kl_mean(*setup.policy, *setup.reference, data);
      CHECK(std::abs(mean) > 1e-3);
      const std::vector<sdk::Example> examples = examples_of(data, false);
      setup.module.prepare_dataset(*setup.context, examples);
      std::vector<int64_t> indices(examples.size());
      for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
      for (const sdk::MicrobatchPlan plan : {sdk::MicrobatchPlan{1, 0}, {3, 0}, {0, kMaxLength}, {8, 0}}) {
        const std::vector<double> z0s =
            setup.z0s(examples, train::training_global_batch(examples, indices, 0, 1), plan);
        REQUIRE_FALSE(z0s.empty());
        for (const double z0 : z0s) CHECK(z0 == Approx(std::max(0.0, mean)).epsilon(1e-5).margin(1e-7));
      }
      // A held-out chunk (index -1: tokenized as it comes) of the same lines gives the same z0.
      const std::vector<sdk::Example> held_out = examples_of(data, true);
      const sdk::GlobalBatch chunk = train::held_out_global_batch(held_out, 0, 8, 0, 1);
      for (const double z0 : setup.z0s(held_out, chunk, {2, 0})) {
        CHECK(z0 == Approx(std::max(0.0, mean)).epsilon(1e-5).margin(1e-7));
      }
    }
  }
}

TEST_CASE("KTO leaves an example without a completion token out of the loss and the KL pairs", "[kto]") {
  Setup setup(5, 9);
  const std::vector<sdk::Example> examples = examples_of(lines(), false);
  setup.module.prepare_dataset(*setup.context, examples);
  const std::vector<int64_t> indices{4, 5, 6};
  setup.context->set_global_batch(train::training_global_batch(examples, indices, 0, 1));
  const auto microbatches = setup.module.prepare(*setup.context, {&examples[4], &examples[5], &examples[6]}, {1, 0});
  REQUIRE(microbatches.size() == 2);
  const auto& first = static_cast<const kto::KtoMicrobatch&>(*microbatches[0]);
  CHECK(first.skipped_examples == 1);
  CHECK(setup.module.count_units(first) == std::vector<int64_t>{1});
}
