// The ORPO formula (orpo_loss.h) on hand-picked probabilities, against the
// closed form; tokenization and the loss mask on a tiny byte tokenizer.
#include "catch_config.h"

#include "orpo_loss.h"

#include <ATen/ATen.h>

#include <cmath>

namespace {

// Bytes 0–255, <bos> 256, <eos> 257, <pad> 258 (ptrain's byte layout).
class ByteTokenizer final : public ptrain::sdk::Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text) const override {
    return std::vector<int64_t>(reinterpret_cast<const unsigned char*>(text.data()),
                                reinterpret_cast<const unsigned char*>(text.data()) + text.size());
  }
  std::string decode(const std::vector<int64_t>& ids) const override { return std::string(ids.begin(), ids.end()); }
  int64_t bos_id() const override { return 256; }
  int64_t eos_id() const override { return 257; }
  int64_t pad_id() const override { return 258; }
  int64_t vocab_size() const override { return 259; }
  std::string fingerprint() const override { return "test-bytes"; }
};

}  // namespace

TEST_CASE("ORPO losses match the closed form", "[orpo]") {
  // Pair 0: P(y_w) = 1/2, P(y_l) = 1/4 → odds 1 and 1/3, log odds ratio log 3,
  //         L_OR = −log σ(log 3) = log(4/3), L_SFT = log 2.
  // Pair 1: P(y_w) = 1/5, P(y_l) = 4/5 → odds 1/4 and 4, ratio log(1/16),
  //         L_OR = −log σ(−log 16) = log 17, L_SFT = log 5.
  const at::Tensor chosen = at::tensor({std::log(0.5), std::log(0.2)}, at::kDouble);
  const at::Tensor rejected = at::tensor({std::log(0.25), std::log(0.8)}, at::kDouble);
  const double lambda = 0.25;
  const orpo::PairLosses losses = orpo::orpo_losses(chosen, rejected, lambda);
  const double expected_or[] = {std::log(4.0 / 3.0), std::log(17.0)};
  const double expected_nll[] = {std::log(2.0), std::log(5.0)};
  const double expected_ratio[] = {std::log(3.0), -std::log(16.0)};
  for (int i = 0; i < 2; ++i) {
    CHECK(losses.log_odds_ratio[i].item<double>() == Approx(expected_ratio[i]).epsilon(1e-12));
    CHECK(losses.odds_ratio_loss[i].item<double>() == Approx(expected_or[i]).epsilon(1e-12));
    CHECK(losses.nll_chosen[i].item<double>() == Approx(expected_nll[i]).epsilon(1e-12));
    CHECK(losses.loss[i].item<double>() == Approx(expected_nll[i] + lambda * expected_or[i]).epsilon(1e-12));
  }
}

TEST_CASE("the ORPO gradient with respect to the log-likelihoods is the closed form", "[orpo]") {
  // d ℓ / d a_w = −1 − λ·σ(−r)·(1 + odds_w) and d ℓ / d a_l = λ·σ(−r)·(1 + odds_l),
  // since d log odds / d a = 1 / (1 − P) = 1 + odds.
  const double a_w = std::log(0.3), a_l = std::log(0.6), lambda = 0.5;
  const at::Tensor chosen = at::tensor({a_w}, at::kDouble).requires_grad_(true);
  const at::Tensor rejected = at::tensor({a_l}, at::kDouble).requires_grad_(true);
  orpo::orpo_losses(chosen, rejected, lambda).loss.sum().backward();
  const double odds_w = 0.3 / 0.7, odds_l = 0.6 / 0.4;
  const double r = std::log(odds_w / odds_l);
  const double sigma_minus_r = 1.0 / (1.0 + std::exp(r));
  CHECK(chosen.grad().item<double>() == Approx(-1.0 - lambda * sigma_minus_r * (1.0 + odds_w)).epsilon(1e-12));
  CHECK(rejected.grad().item<double>() == Approx(lambda * sigma_minus_r * (1.0 + odds_l)).epsilon(1e-12));
}

TEST_CASE("pairs are cut to max_length keeping the prompt's end and one answer token at least", "[orpo]") {
  const ByteTokenizer tokenizer;
  const orpo::TokenizedPair fits = orpo::tokenize_pair(tokenizer, "1+1=", "2", "33", 16);
  CHECK_FALSE(fits.truncated);
  CHECK(fits.prompt == std::vector<int64_t>{256, '1', '+', '1', '='});
  CHECK(fits.chosen == std::vector<int64_t>{'2', 257});
  CHECK(fits.rejected == std::vector<int64_t>{'3', '3', 257});

  // <bos> + 8 prompt bytes + 4 completion tokens > 8: the prompt keeps its last 3.
  const orpo::TokenizedPair cut = orpo::tokenize_pair(tokenizer, "abcdefgh", "xyz", "q", 8);
  CHECK(cut.truncated);
  CHECK(cut.prompt == std::vector<int64_t>{256, 'f', 'g', 'h'});
  CHECK(cut.chosen == std::vector<int64_t>{'x', 'y', 'z', 257});

  // A completion longer than everything: the prompt goes, the answer is cut.
  const orpo::TokenizedPair long_answer = orpo::tokenize_pair(tokenizer, "p", "0123456789", "1", 6);
  CHECK(long_answer.prompt == std::vector<int64_t>{256});
  CHECK(long_answer.chosen == std::vector<int64_t>{'0', '1', '2', '3', '4'});
}

TEST_CASE("a collated microbatch trains exactly the completion tokens of both sides", "[orpo]") {
  const ByteTokenizer tokenizer;
  const std::vector<orpo::TokenizedPair> pairs{orpo::tokenize_pair(tokenizer, "1+1=", "2", "33", 16),
                                               orpo::tokenize_pair(tokenizer, "9=", "9", "8", 16)};
  const ptrain::sdk::TokenBatch batch = orpo::collate_pairs(pairs, tokenizer.pad_id());
  REQUIRE(batch.input_ids.sizes() == at::IntArrayRef({4, 7}));
  // Rows: chosen 0, chosen 1, rejected 0, rejected 1; trained tokens = |completion| + <eos>.
  const std::vector<int64_t> trained{2, 2, 3, 2};
  for (int64_t row = 0; row < 4; ++row) CHECK(batch.loss_mask[row].sum().item<int64_t>() == trained[row]);
  // Row 0: <bos> 1 + 1 = predicts "2" at position 4, <eos> at 5.
  CHECK(batch.loss_mask[0][4].item<bool>());
  CHECK(batch.target_ids[0][4].item<int64_t>() == '2');
  CHECK(batch.target_ids[0][5].item<int64_t>() == 257);
  CHECK_FALSE(batch.loss_mask[0][3].item<bool>());
}
