#include "ptrain/sdk/util/microbatching.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

namespace ptrain::sdk {

std::vector<std::vector<int64_t>> split_into_microbatches(const std::vector<int64_t>& lengths,
                                                          const MicrobatchPlan& plan) {
  TORCH_CHECK((plan.micro_size > 0) != (plan.micro_tokens > 0),
              "MicrobatchPlan needs exactly one of micro_size and micro_tokens, got ", plan.micro_size, " and ",
              plan.micro_tokens);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  if (plan.group_by_length) {
    // Longest first; stable, so equal lengths keep their order.
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  }
  std::vector<std::vector<int64_t>> microbatches;
  std::vector<int64_t> current;
  int64_t current_longest = 0;
  for (const int64_t i : order) {
    bool fits = true;
    if (plan.micro_size > 0) {
      fits = static_cast<int64_t>(current.size()) < plan.micro_size;
    } else {
      // Padded cost of the microbatch if example i joins it.
      const int64_t longest = std::max(current_longest, lengths[i]);
      fits = current.empty() || longest * static_cast<int64_t>(current.size() + 1) <= plan.micro_tokens;
    }
    if (!fits) {
      microbatches.push_back(std::move(current));
      current.clear();
      current_longest = 0;
    }
    current.push_back(i);
    current_longest = std::max(current_longest, lengths[i]);
  }
  if (!current.empty()) microbatches.push_back(std::move(current));
  return microbatches;
}

std::vector<PackedMicrobatch> plan_packed_microbatches(const std::vector<int64_t>& lengths,
                                                       const MicrobatchPlan& plan) {
  TORCH_CHECK(plan.packing && plan.micro_tokens > 0 && plan.row_tokens > 0,
              "packing needs a token budget: MicrobatchPlan has packing ", plan.packing, ", micro_tokens ",
              plan.micro_tokens, ", row_tokens ", plan.row_tokens);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });

  // Best-fit-decreasing (Johnson 1973): within 22% of the fewest rows, and in
  // practice a few percent, for any length distribution.
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> row_used;
  for (const int64_t example : order) {
    int64_t best = -1;
    for (size_t r = 0; r < rows.size(); ++r) {
      const bool fits = row_used[r] + lengths[example] <= plan.row_tokens;
      if (fits && (best < 0 || row_used[r] > row_used[best])) best = static_cast<int64_t>(r);
    }
    if (best < 0) {
      rows.emplace_back();
      row_used.push_back(0);
      best = static_cast<int64_t>(rows.size()) - 1;
    }
    rows[best].push_back(example);
    row_used[best] += lengths[example];
  }

  // Rows, fullest first, into microbatches under the padded-token budget.
  MicrobatchPlan by_tokens;
  by_tokens.micro_tokens = plan.micro_tokens;
  by_tokens.group_by_length = true;
  std::vector<PackedMicrobatch> microbatches;
  for (const std::vector<int64_t>& members : split_into_microbatches(row_used, by_tokens)) {
    PackedMicrobatch microbatch;
    for (const int64_t row : members) microbatch.push_back(std::move(rows[row]));
    microbatches.push_back(std::move(microbatch));
  }
  return microbatches;
}

std::pair<at::Tensor, at::Tensor> packed_document_layout(const std::vector<std::vector<int64_t>>& rows) {
  int64_t longest = 0;
  for (const auto& row : rows) longest = std::max(longest, std::accumulate(row.begin(), row.end(), int64_t{0}));
  const auto num_rows = static_cast<int64_t>(rows.size());
  at::Tensor document_ids = at::full({num_rows, longest}, -1, at::kLong);
  at::Tensor position_ids = at::zeros({num_rows, longest}, at::kLong);
  auto documents = document_ids.accessor<int64_t, 2>();
  auto positions = position_ids.accessor<int64_t, 2>();
  for (int64_t r = 0; r < num_rows; ++r) {
    int64_t column = 0;
    for (size_t d = 0; d < rows[r].size(); ++d) {
      for (int64_t p = 0; p < rows[r][d]; ++p, ++column) {
        documents[r][column] = static_cast<int64_t>(d);
        positions[r][column] = p;
      }
    }
  }
  return {document_ids, position_ids};
}

at::Tensor pad_sequences(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id) {
  int64_t longest = 0;
  for (const auto& sequence : sequences) longest = std::max<int64_t>(longest, sequence.size());
  at::Tensor padded = at::full({static_cast<int64_t>(sequences.size()), longest}, pad_id, at::kLong);
  auto accessor = padded.accessor<int64_t, 2>();
  for (size_t row = 0; row < sequences.size(); ++row) {
    for (size_t col = 0; col < sequences[row].size(); ++col) accessor[row][col] = sequences[row][col];
  }
  return padded;
}

}  // namespace ptrain::sdk
