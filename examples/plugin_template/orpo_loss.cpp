#include "orpo_loss.h"
#include "ptrain/sdk/util/microbatching.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace orpo {

PairLosses orpo_losses(const at::Tensor& chosen_mean_logp, const at::Tensor& rejected_mean_logp, double lambda) {
  TORCH_CHECK(chosen_mean_logp.sizes() == rejected_mean_logp.sizes(), "orpo_losses: chosen ", chosen_mean_logp.sizes(),
              " vs rejected ", rejected_mean_logp.sizes());
  // log(1 − e^a) as log(−expm1(a)); a = 0 exactly (a certain answer) would be
  // infinite odds, so a stays a hair below 0.
  const auto log_odds = [](const at::Tensor& mean_logp) {
    const at::Tensor a = mean_logp.to(at::kDouble).clamp_max(-1e-12);
    return a - at::log(-at::expm1(a));
  };
  PairLosses out;
  out.log_odds_ratio = log_odds(chosen_mean_logp) - log_odds(rejected_mean_logp);
  out.odds_ratio_loss = -at::log_sigmoid(out.log_odds_ratio);
  out.nll_chosen = -chosen_mean_logp.to(at::kDouble);
  out.loss = out.nll_chosen + lambda * out.odds_ratio_loss;
  return out;
}

TokenizedPair tokenize_pair(const ptrain::sdk::Tokenizer& tokenizer, std::string_view prompt, std::string_view chosen,
                            std::string_view rejected, int64_t max_length) {
  TokenizedPair pair;
  std::vector<int64_t> prompt_ids = tokenizer.encode(prompt);
  pair.chosen = tokenizer.encode(chosen);
  pair.rejected = tokenizer.encode(rejected);
  pair.chosen.push_back(tokenizer.eos_id());
  pair.rejected.push_back(tokenizer.eos_id());
  const int64_t bos = tokenizer.bos_id() >= 0 ? 1 : 0;
  const auto longest = static_cast<int64_t>(std::max(pair.chosen.size(), pair.rejected.size()));
  const auto prompt_size = static_cast<int64_t>(prompt_ids.size());
  // Something must precede the first completion token to predict it.
  const int64_t min_prompt = bos == 1 ? 0 : 1;
  const int64_t kept_prompt = std::min(prompt_size, std::max(min_prompt, max_length - bos - longest));
  const int64_t completion_room = std::max<int64_t>(1, max_length - bos - kept_prompt);
  pair.truncated = kept_prompt < prompt_size || longest > completion_room;
  if (bos == 1) pair.prompt.push_back(tokenizer.bos_id());
  pair.prompt.insert(pair.prompt.end(), prompt_ids.end() - kept_prompt, prompt_ids.end());
  TORCH_CHECK(!pair.prompt.empty(), "a pair needs <bos> or a prompt token before its answers");
  for (std::vector<int64_t>* completion : {&pair.chosen, &pair.rejected}) {
    if (static_cast<int64_t>(completion->size()) > completion_room) completion->resize(completion_room);
  }
  return pair;
}

ptrain::sdk::TokenBatch collate_pairs(const std::vector<TokenizedPair>& pairs, int64_t pad_id) {
  std::vector<std::vector<int64_t>> inputs, targets, trained;
  for (const bool chosen_side : {true, false}) {
    for (const TokenizedPair& pair : pairs) {
      std::vector<int64_t> sequence = pair.prompt;
      const std::vector<int64_t>& completion = chosen_side ? pair.chosen : pair.rejected;
      sequence.insert(sequence.end(), completion.begin(), completion.end());
      // Position t predicts token t+1; trained where that token is a completion token.
      inputs.emplace_back(sequence.begin(), sequence.end() - 1);
      targets.emplace_back(sequence.begin() + 1, sequence.end());
      std::vector<int64_t> mask(sequence.size() - 1, 0);
      std::fill(mask.begin() + static_cast<int64_t>(pair.prompt.size()) - 1, mask.end(), 1);
      trained.push_back(std::move(mask));
    }
  }
  ptrain::sdk::TokenBatch batch;
  batch.input_ids = ptrain::sdk::pad_sequences(inputs, pad_id);
  batch.target_ids = ptrain::sdk::pad_sequences(targets, pad_id);
  batch.loss_mask = ptrain::sdk::pad_sequences(trained, 0).to(at::kBool);
  return batch;
}

}  // namespace orpo
