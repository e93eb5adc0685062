#include "ptrain/sdk/batch.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace ptrain::sdk {
namespace {

const char* json_type_name(const nlohmann::json& value) { return value.type_name(); }

}  // namespace

bool has_field(const Example& example, const char* field) {
  return example.fields.is_object() && example.fields.contains(field);
}

const std::string& require_string(const Example& example, const char* field) {
  if (!has_field(example, field)) {
    throw DataError(example.location + ": missing field '" + field + "'");
  }
  const nlohmann::json& value = example.fields.at(field);
  if (!value.is_string()) {
    throw DataError(example.location + ": field '" + field + "': expected a string, got " + json_type_name(value));
  }
  return value.get_ref<const std::string&>();
}

std::vector<std::vector<int64_t>> split_into_microbatches(const std::vector<int64_t>& lengths,
                                                          const MicrobatchPlan& plan) {
  TORCH_CHECK((plan.micro_size > 0) != (plan.micro_tokens > 0),
              "MicrobatchPlan needs exactly one of micro_size and micro_tokens, got ", plan.micro_size, " and ",
              plan.micro_tokens);
  std::vector<std::vector<int64_t>> microbatches;
  std::vector<int64_t> current;
  int64_t current_longest = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(lengths.size()); ++i) {
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
