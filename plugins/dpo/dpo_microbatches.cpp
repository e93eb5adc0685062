#include "dpo_microbatches.h"
#include "ptrain/sdk/util/microbatching.h"

#include <iterator>
#include <limits>

namespace ptrain::dpo {
namespace {

// Packs the sequences of `members` (chosen sides, then rejected sides) into rows of plan.row_tokens.
std::vector<std::vector<int64_t>> pack_sequences(const std::vector<TokenizedPair>& pairs,
                                                 const std::vector<int64_t>& members, const sdk::MicrobatchPlan& plan) {
  sdk::MicrobatchPlan row_plan = plan;
  row_plan.micro_tokens = std::numeric_limits<int64_t>::max();
  const auto count = static_cast<int64_t>(members.size());
  std::vector<int64_t> sequence_lengths(2 * count);
  for (int64_t k = 0; k < count; ++k) {
    sequence_lengths[k] = sequence_input_length(pairs[members[k]], false);
    sequence_lengths[count + k] = sequence_input_length(pairs[members[k]], true);
  }
  std::vector<std::vector<int64_t>> rows;
  for (sdk::PackedMicrobatch& part : sdk::plan_packed_microbatches(sequence_lengths, row_plan)) {
    std::move(part.begin(), part.end(), std::back_inserter(rows));
  }
  return rows;
}

std::vector<PairGroup> plan_packed(const std::vector<TokenizedPair>& pairs, const sdk::MicrobatchPlan& plan) {
  sdk::MicrobatchPlan pair_plan = plan;
  pair_plan.row_tokens = 2 * plan.row_tokens;
  std::vector<int64_t> packed_lengths;
  for (const TokenizedPair& pair : pairs) packed_lengths.push_back(pair_packed_length(pair));
  std::vector<PairGroup> groups;
  for (const sdk::PackedMicrobatch& pair_rows : sdk::plan_packed_microbatches(packed_lengths, pair_plan)) {
    PairGroup group;
    for (const std::vector<int64_t>& row : pair_rows) group.members.insert(group.members.end(), row.begin(), row.end());
    group.rows = pack_sequences(pairs, group.members, plan);
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace

std::vector<PairGroup> plan_pair_microbatches(const std::vector<TokenizedPair>& pairs,
                                              const sdk::MicrobatchPlan& plan) {
  if (plan.packing) return plan_packed(pairs, plan);
  std::vector<int64_t> lengths;
  for (const TokenizedPair& pair : pairs) lengths.push_back(2 * pair_input_length(pair));
  std::vector<PairGroup> groups;
  for (std::vector<int64_t>& members : sdk::split_into_microbatches(lengths, plan)) {
    groups.push_back({std::move(members), std::nullopt});
  }
  return groups;
}

std::unique_ptr<DpoMicrobatch> collate_pair_group(const std::vector<TokenizedPair>& pairs, const PairGroup& group,
                                                  int64_t pad_id, bool concatenated) {
  auto microbatch = std::make_unique<DpoMicrobatch>();
  std::vector<TokenizedPair> members;
  for (const int64_t member : group.members) {
    const TokenizedPair& pair = pairs[member];
    members.push_back(pair);
    microbatch->truncated_pairs += pair.truncated ? 1 : 0;
    microbatch->num_tokens += pair_packed_length(pair);
  }
  microbatch->pairs =
      group.rows ? collate_packed_pairs(members, *group.rows, pad_id) : collate_pairs(members, pad_id, concatenated);
  microbatch->num_examples = static_cast<int64_t>(group.members.size());
  for (const sdk::TokenBatch& forward : microbatch->pairs.forwards) {
    microbatch->padded_tokens += forward.input_ids.numel();
  }
  return microbatch;
}

void DpoMicrobatch::to_device(at::Device device) {
  pairs = pairs_on_device(pairs, device);
  reference_parts = sdk::tensor_on_device(reference_parts, device);
}

}  // namespace ptrain::dpo
