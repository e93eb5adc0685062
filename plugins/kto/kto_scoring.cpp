#include "kto_scoring.h"

#include "kto_loss.h"

#include "ptrain/sdk/util/microbatching.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace ptrain::kto {

at::Tensor completion_log_probs(sdk::LanguageModel& model, const sdk::TokenBatch& batch) {
  return model.target_log_probs(batch).log_probs.to(at::kDouble).sum(1);  // 0 off the mask
}

at::Tensor kl_log_ratios(sdk::Context& ctx, sdk::LanguageModel& reference, const std::vector<PromptCompletion>& pairs,
                         const sdk::MicrobatchPlan& plan, int64_t max_length) {
  const at::NoGradGuard no_grad;
  std::vector<int64_t> lengths;
  for (const PromptCompletion& pair : pairs) lengths.push_back(input_length(pair, max_length));
  at::Tensor ratios = at::zeros({static_cast<int64_t>(pairs.size())}, at::dtype(at::kDouble).device(ctx.device()));
  sdk::MicrobatchPlan unpacked = plan;
  unpacked.packing = false;
  for (const std::vector<int64_t>& members : sdk::split_into_microbatches(lengths, unpacked)) {
    std::vector<PromptCompletion> chunk;
    int64_t tokens = 0;
    for (const int64_t member : members) {
      chunk.push_back(pairs[member]);
      tokens += lengths[member];
    }
    const sdk::TokenBatch batch =
        sdk::batch_on_device(collate_sequences(chunk, max_length, ctx.tokenizer().pad_id()), ctx.device());
    const at::Tensor chunk_ratios = completion_log_probs(ctx.policy(), batch) - completion_log_probs(reference, batch);
    ratios.index_copy_(0, at::tensor(members, at::kLong).to(ctx.device()), chunk_ratios);
    ctx.add_forward_tokens(tokens, ctx.policy().num_parameters());
    ctx.add_forward_tokens(tokens, reference.num_parameters());
  }
  return ratios;
}

at::Tensor global_reference_point(sdk::Context& ctx, sdk::LanguageModel& reference,
                                  const std::vector<const KtoExample*>& batch,
                                  const std::vector<int64_t>& rank_positions, const sdk::MicrobatchPlan& plan,
                                  int64_t max_length) {
  std::vector<bool> scorable;
  for (const KtoExample* example : batch) scorable.push_back(example->scorable(max_length));
  const std::vector<int64_t> partners = kl_partners(scorable);
  std::vector<PromptCompletion> pairs;
  std::vector<double> positions;
  for (const int64_t position : rank_positions) {
    const int64_t partner = partners.at(static_cast<size_t>(position));
    if (partner < 0) continue;
    pairs.push_back({&batch[position]->prompt, &batch[partner]->completion});
    positions.push_back(static_cast<double>(position));
  }
  const at::Tensor ratios = kl_log_ratios(ctx, reference, pairs, plan, max_length);
  // (position, log-ratio) rows of every rank; summed in batch order, so the
  // mean does not depend on which rank scored which pair.
  const at::Tensor rows = at::stack({at::tensor(positions, at::kDouble).to(ratios.device()), ratios}, 1);  // [n, 2]
  const at::Tensor gathered = ctx.all_gather(rows);
  at::Tensor by_position = at::zeros({static_cast<int64_t>(batch.size())}, ratios.options());
  by_position.index_put_({gathered.select(1, 0).to(at::kLong)}, gathered.select(1, 1));
  std::vector<int64_t> paired;
  for (size_t i = 0; i < partners.size(); ++i) {
    if (partners[i] >= 0) paired.push_back(static_cast<int64_t>(i));
  }
  return reference_point(by_position.index_select(0, at::tensor(paired, at::kLong).to(ratios.device())));
}

}  // namespace ptrain::kto
