// The DPO pair losses against closed forms written out in plain doubles, the
// sequence log-prob split of LD-DPO, WPO weights, and rewards/accuracy on a
// batch where comparing mean rewards and averaging per-pair wins disagree.
#include "catch.h"

#include "core/dist/communicator.h"
#include "core/metrics/metric_reducer.h"
#include "core/tokenizer/byte_tokenizer.h"
#include "dpo_loss.h"
#include "dpo_module.h"
#include "dpo_test_support.h"
#include "ptrain/sdk/context.h"

#include <ATen/ATen.h>

#include <cmath>
#include <functional>

namespace {

using namespace ptrain;
using dpo::LossType;

double log_sigmoid(double x) { return -std::log1p(std::exp(-x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Hand-made log-probs of three pairs: policy π, reference ρ, token counts n.
struct HandPair {
  double pi_c, pi_r, ref_c, ref_r, n_c, n_r;
};
const std::vector<HandPair> kPairs{
    {-4.0, -7.5, -5.0, -6.0, 4, 6}, {-12.0, -3.0, -10.0, -4.0, 8, 2}, {-2.5, -2.25, -2.0, -3.5, 1, 3}};

dpo::PairLogProbs to_tensors(const std::vector<HandPair>& pairs) {
  std::vector<double> pi_c, pi_r, ref_c, ref_r, n_c, n_r;
  for (const HandPair& p : pairs) {
    pi_c.push_back(p.pi_c);
    pi_r.push_back(p.pi_r);
    ref_c.push_back(p.ref_c);
    ref_r.push_back(p.ref_r);
    n_c.push_back(p.n_c);
    n_r.push_back(p.n_r);
  }
  const auto make = [](const std::vector<double>& values) { return at::tensor(values, at::kDouble); };
  return {make(pi_c), make(pi_r), make(ref_c), make(ref_r), make(n_c), make(n_r)};
}

void check_loss(LossType type, const dpo::LossParams& params, const std::function<double(const HandPair&)>& expected) {
  INFO("loss " << dpo::loss_type_name(type));
  const at::Tensor losses = dpo::pair_loss(type, to_tensors(kPairs), params);
  REQUIRE(losses.sizes() == at::IntArrayRef({3}));
  for (size_t i = 0; i < kPairs.size(); ++i) {
    INFO("pair " << i);
    CHECK(losses[static_cast<int64_t>(i)].item<double>() == Approx(expected(kPairs[i])).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("every pair loss matches its closed form on hand-made log-probs", "[dpo][loss]") {
  dpo::LossParams params;
  params.beta = 0.7;
  params.label_smoothing = 0.1;
  params.gamma = 0.4;
  params.discopop_tau = 0.3;
  params.bco_delta = 0.25;
  const double b = params.beta;
  const double e = params.label_smoothing;
  const auto z = [](const HandPair& p) { return (p.pi_c - p.ref_c) - (p.pi_r - p.ref_r); };
  const auto z_mean = [](const HandPair& p) { return (p.pi_c - p.ref_c) / p.n_c - (p.pi_r - p.ref_r) / p.n_r; };

  check_loss(LossType::kSigmoid, params,
             [&](const HandPair& p) { return -(1 - e) * log_sigmoid(b * z(p)) - e * log_sigmoid(-b * z(p)); });
  check_loss(LossType::kSigmoidNorm, params, [&](const HandPair& p) {
    return -(1 - e) * log_sigmoid(b * z_mean(p)) - e * log_sigmoid(-b * z_mean(p));
  });
  check_loss(LossType::kRobust, params, [&](const HandPair& p) {
    return (-(1 - e) * log_sigmoid(b * z(p)) + e * log_sigmoid(-b * z(p))) / (1 - 2 * e);
  });
  check_loss(LossType::kHinge, params, [&](const HandPair& p) { return std::max(0.0, 1 - b * z(p)); });
  check_loss(LossType::kIpo, params, [&](const HandPair& p) { return std::pow(z_mean(p) - 1 / (2 * b), 2); });
  check_loss(LossType::kExoPair, params, [&](const HandPair& p) {
    const double u = b * z(p);
    return sigmoid(u) * (log_sigmoid(u) - std::log(1 - e)) + sigmoid(-u) * (log_sigmoid(-u) - std::log(e));
  });
  check_loss(LossType::kNcaPair, params, [&](const HandPair& p) {
    const double hc = p.pi_c - p.ref_c;
    const double hr = p.pi_r - p.ref_r;
    return -log_sigmoid(b * hc) - 0.5 * log_sigmoid(-b * hc) - 0.5 * log_sigmoid(-b * hr);
  });
  check_loss(LossType::kBcoPair, params, [&](const HandPair& p) {
    const double rc = b * (p.pi_c - p.ref_c);
    const double rr = b * (p.pi_r - p.ref_r);
    return -log_sigmoid(rc - 0.25) - log_sigmoid(-(rr - 0.25));
  });
  check_loss(LossType::kSppoHard, params, [&](const HandPair& p) {
    return std::pow(p.pi_c - p.ref_c - 1 / (2 * b), 2) + std::pow(p.pi_r - p.ref_r + 1 / (2 * b), 2);
  });
  check_loss(LossType::kApoZero, params,
             [&](const HandPair& p) { return 1 - sigmoid(b * (p.pi_c - p.ref_c)) + sigmoid(b * (p.pi_r - p.ref_r)); });
  check_loss(LossType::kApoDown, params,
             [&](const HandPair& p) { return sigmoid(b * (p.pi_c - p.ref_c)) + 1 - sigmoid(b * z(p)); });
  check_loss(LossType::kDiscopop, params, [&](const HandPair& p) {
    const double u = b * z(p);
    const double modulation = sigmoid(u / 0.3);
    return (1 - modulation) * -log_sigmoid(u) + modulation * std::exp(-u);
  });
  check_loss(LossType::kSimpo, params, [&](const HandPair& p) {
    const double u = b * (p.pi_c / p.n_c - p.pi_r / p.n_r) - 0.4;  // ρ plays no part
    return -(1 - e) * log_sigmoid(u) - e * log_sigmoid(-u);
  });

  // exo_pair without label smoothing uses ε = 1e-3, as TRL does.
  dpo::LossParams unsmoothed = params;
  unsmoothed.label_smoothing = 0.0;
  check_loss(LossType::kExoPair, unsmoothed, [&](const HandPair& p) {
    const double u = b * z(p);
    return sigmoid(u) * (log_sigmoid(u) - std::log(1 - 1e-3)) + sigmoid(-u) * (log_sigmoid(-u) - std::log(1e-3));
  });
  // Plain DPO (Rafailov et al.) is sigmoid with ε = 0.
  check_loss(LossType::kSigmoid, unsmoothed, [&](const HandPair& p) { return -log_sigmoid(b * z(p)); });

  CHECK_THROWS_WITH(dpo::pair_loss(LossType::kSft, to_tensors(kPairs), params),
                    Catch::Contains("'sft' is not a pair loss"));
}

TEST_CASE("pair losses are differentiable in the policy log-probs only", "[dpo][loss]") {
  dpo::PairLogProbs logps = to_tensors(kPairs);
  logps.policy_chosen.requires_grad_(true);
  const at::Tensor loss = dpo::pair_loss(LossType::kSigmoid, logps, {}).sum();
  loss.backward();
  // d/dπ_c of −log σ(βz) = −β σ(−βz).
  for (size_t i = 0; i < kPairs.size(); ++i) {
    const HandPair& p = kPairs[i];
    const double z = (p.pi_c - p.ref_c) - (p.pi_r - p.ref_r);
    CHECK(logps.policy_chosen.grad()[static_cast<int64_t>(i)].item<double>() ==
          Approx(-0.1 * sigmoid(-0.1 * z)).epsilon(1e-12));
  }
}

TEST_CASE("rewards are β-scaled log-ratios, in the loss's sum or token-mean form", "[dpo][loss]") {
  const dpo::PairLogProbs logps = to_tensors(kPairs);
  const dpo::PairRewards sums = dpo::pair_rewards(LossType::kSigmoid, logps, 0.5);
  const dpo::PairRewards means = dpo::pair_rewards(LossType::kIpo, logps, 0.5);
  for (size_t i = 0; i < kPairs.size(); ++i) {
    const HandPair& p = kPairs[i];
    const auto k = static_cast<int64_t>(i);
    CHECK(sums.chosen[k].item<double>() == Approx(0.5 * (p.pi_c - p.ref_c)));
    CHECK(sums.rejected[k].item<double>() == Approx(0.5 * (p.pi_r - p.ref_r)));
    CHECK(means.chosen[k].item<double>() == Approx(0.5 * (p.pi_c - p.ref_c) / p.n_c));
    CHECK(means.rejected[k].item<double>() == Approx(0.5 * (p.pi_r - p.ref_r) / p.n_r));
  }
}

TEST_CASE("LD-DPO splits sequence log-probs at the shorter answer's length", "[dpo][loss]") {
  // Two rows: 3 trained tokens of which 2 shared; 2 trained tokens, both shared.
  const at::Tensor token_log_probs =
      at::tensor({0.0, -1.0, -2.0, -4.0, 0.0, -0.5, -0.25, 0.0}, at::kFloat).view({2, 4});
  const at::Tensor loss_mask = at::tensor({0, 1, 1, 1, 0, 1, 1, 0}, at::kLong).to(at::kBool).view({2, 4});
  const at::Tensor shared_mask = at::tensor({0, 1, 1, 0, 0, 1, 1, 0}, at::kLong).to(at::kBool).view({2, 4});
  const dpo::SequenceLogProbParts parts = dpo::sequence_log_prob_parts(token_log_probs, loss_mask, shared_mask);
  CHECK(parts.shared[0].item<double>() == Approx(-3.0));
  CHECK(parts.rest[0].item<double>() == Approx(-4.0));
  CHECK(parts.shared[1].item<double>() == Approx(-0.75));
  CHECK(parts.rest[1].item<double>() == Approx(0.0));
  const at::Tensor combined = dpo::combine_parts(parts, 0.25);
  CHECK(combined[0].item<double>() == Approx(-3.0 + 0.25 * -4.0));
  CHECK(dpo::combine_parts(parts, 1.0)[0].item<double>() == Approx(-7.0));
}

TEST_CASE("WPO weights are min(1, exp(mean adjusted log-prob of chosen + rejected))", "[dpo][loss]") {
  // One row, vocabulary of 3, two positions, only the second trained.
  const at::Tensor logits = at::tensor({5.0, 0.0, 0.0, 1.0, 2.0, 0.5}, at::kFloat).view({1, 2, 3});
  const at::Tensor targets = at::tensor({0, 1}, at::kLong).view({1, 2});
  const at::Tensor mask = at::tensor({0, 1}, at::kLong).to(at::kBool).view({1, 2});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(0.5);
  const double p[3] = {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(0.5) / z};
  const double expected = std::log(p[1]) - std::log(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
  const at::Tensor means = dpo::wpo_adjusted_log_prob_means(logits, targets, mask);
  CHECK(means[0].item<double>() == Approx(expected).epsilon(1e-6));
  const at::Tensor weights =
      dpo::wpo_pair_weights(at::tensor({-0.5, 0.3}, at::kDouble), at::tensor({-0.25, 0.4}, at::kDouble));
  CHECK(weights[0].item<double>() == Approx(std::exp(-0.75)));
  CHECK(weights[1].item<double>() == 1.0);  // clamped
}

namespace {

// A model whose log-prob of every target is −0.01·(target id): sequence
// log-probs are then fixed by the completion bytes alone.
class ByteCostModel final : public sdk::LanguageModel {
 public:
  sdk::TargetLogProbs target_log_probs(const sdk::TokenBatch& batch) override {
    const at::Tensor log_probs = -0.01 * batch.target_ids.to(at::kFloat);
    sdk::TargetLogProbs out;
    out.log_probs = at::where(batch.loss_mask, log_probs, at::zeros_like(log_probs));
    out.is_argmax = at::zeros_like(batch.loss_mask);
    return out;
  }
  at::Tensor logits(const at::Tensor& input_ids) override {
    return at::zeros({input_ids.size(0), input_ids.size(1), 259});
  }
  int64_t vocab_size() const override { return 259; }
  int64_t num_parameters() const override { return 0; }
  void soft_update_from(const sdk::LanguageModel&, double) override {}
};

class QuietLogger final : public sdk::Logger {
 public:
  void info(std::string_view, std::string_view) override {}
  void warn(std::string_view, std::string_view) override {}
  void error(std::string_view, std::string_view) override {}
};

class ByteCostContext final : public sdk::Context {
 public:
  explicit ByteCostContext(const sdk::ConfigValues& values) : values_(values) {}
  sdk::RankInfo rank_info() const override { return {}; }
  sdk::RunInfo run_info() const override { return {0, 64, 0, 0, ""}; }
  sdk::LanguageModel& policy() override { return model_; }
  std::unique_ptr<sdk::LanguageModel> frozen_policy_copy() override { return std::make_unique<ByteCostModel>(); }
  std::unique_ptr<sdk::LanguageModel> load_frozen_model(const std::string&) override {
    return std::make_unique<ByteCostModel>();
  }
  void all_reduce_sum(at::Tensor&) override {}
  const sdk::Tokenizer& tokenizer() const override { return tokenizer_; }
  const sdk::ConfigValues& module_config() const override { return values_; }
  sdk::Logger& logger() override { return logger_; }

 private:
  const sdk::ConfigValues& values_;
  ByteCostModel model_;
  tokenizer::ByteTokenizer tokenizer_;
  QuietLogger logger_;
};

}  // namespace

TEST_CASE("rewards/accuracy is the mean over pairs of 1[chosen reward > rejected reward]", "[dpo][metrics]") {
  // Sequence log-prob of a completion: −0.01·(Σ bytes + 257 for <eos>).
  // Pair 1 wins by a lot, pairs 2 and 3 lose by a little: the mean chosen
  // reward beats the mean rejected reward, yet only 1 pair in 3 is won.
  const std::vector<dpo_test::PreferencePair> pairs{{"p=", "", "zzzzzzzzzz"}, {"p=", "bb", "a"}, {"p=", "bb", "a"}};
  const std::vector<sdk::Example> examples = dpo_test::to_examples(pairs);
  const sdk::ConfigValues values = dpo_test::dpo_values({{"reference_free", true}, {"beta", 1.0}});
  ByteCostContext context(values);
  auto communicator = dist::make_single_process_communicator();

  for (const int64_t micro_size : {3, 2, 1}) {
    INFO("micro_size " << micro_size);
    dpo::DpoModule module;
    module.setup(context);
    metrics::MetricReducer reducer(module.metric_specs());
    for (const auto& microbatch : module.prepare(context, dpo_test::pointers_to(examples), {micro_size, 0})) {
      reducer.add(module.microbatch_loss(context, *microbatch).metrics);
    }
    const auto reduced = reducer.reduce(*communicator);
    const double chosen = -0.01 * (257 + (2 * 98 + 257) * 2) / 3.0;
    const double rejected = -0.01 * ((10 * 122 + 257) + (97 + 257) * 2) / 3.0;
    CHECK(reduced.at("rewards/chosen") == Approx(chosen).epsilon(1e-6));
    CHECK(reduced.at("rewards/rejected") == Approx(rejected).epsilon(1e-6));
    REQUIRE(reduced.at("rewards/chosen") > reduced.at("rewards/rejected"));  // the mean comparison says "won"
    CHECK(reduced.at("rewards/accuracy") == Approx(1.0 / 3.0).epsilon(1e-12));
    CHECK(reduced.at("rewards/margins") == Approx(chosen - rejected).epsilon(1e-6));
    CHECK(reduced.at("logps/chosen") == Approx(chosen).epsilon(1e-6));
  }
}
