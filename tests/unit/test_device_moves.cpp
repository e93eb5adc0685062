// Microbatch::to_device of the bundled plugins: every tensor the loss reads
// reaches the device the core names. The meta device stands in for a GPU on
// machines without one: a tensor left behind stays on the CPU and is caught.
#include "catch.h"

#include "dpo_microbatches.h"
#include "grpo_module.h"
#include "ptrain/sdk/batch.h"
#include "sft_module.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace {

using namespace ptrain;

const at::Device kElsewhere(at::kMeta);

sdk::TokenBatch packed_batch() {
  sdk::TokenBatch batch(at::zeros({2, 4}, at::kLong), at::zeros({2, 4}, at::kLong), at::ones({2, 4}, at::kBool));
  batch.position_ids = at::zeros({2, 4}, at::kLong);
  batch.document_ids = at::zeros({2, 4}, at::kLong);
  return batch;
}

// The names of the batch's defined tensors that are not on kElsewhere.
std::vector<std::string> left_behind(const sdk::TokenBatch& batch, const std::string& prefix) {
  std::vector<std::string> names;
  const std::pair<const char*, const at::Tensor*> fields[] = {{"input_ids", &batch.input_ids},
                                                              {"target_ids", &batch.target_ids},
                                                              {"loss_mask", &batch.loss_mask},
                                                              {"position_ids", &batch.position_ids},
                                                              {"document_ids", &batch.document_ids}};
  for (const auto& [name, tensor] : fields) {
    if (tensor->defined() && tensor->device() != kElsewhere) names.push_back(prefix + name);
  }
  return names;
}

void add_if_left(std::vector<std::string>& names, const std::string& name, const at::Tensor& tensor) {
  if (tensor.defined() && tensor.device() != kElsewhere) names.push_back(name);
}

}  // namespace

TEST_CASE("batch_on_device moves every defined tensor and keeps undefined ones undefined", "[device]") {
  const sdk::TokenBatch moved = sdk::batch_on_device(packed_batch(), kElsewhere);
  CHECK(left_behind(moved, "").empty());
  CHECK(moved.input_ids.sizes() == at::IntArrayRef({2, 4}));

  sdk::TokenBatch unpacked(at::zeros({1, 3}, at::kLong), at::zeros({1, 3}, at::kLong), at::ones({1, 3}, at::kBool));
  const sdk::TokenBatch moved_unpacked = sdk::batch_on_device(unpacked, kElsewhere);
  CHECK_FALSE(moved_unpacked.position_ids.defined());
  CHECK_FALSE(moved_unpacked.document_ids.defined());
  CHECK(left_behind(moved_unpacked, "").empty());

  // Already there: the same tensor, no copy.
  const at::Tensor host = at::ones({3});
  CHECK(sdk::tensor_on_device(host, at::kCPU).is_same(host));
}

TEST_CASE("the SFT, DPO and GRPO microbatches move every tensor their loss reads", "[device]") {
  SECTION("sft") {
    sft::SftMicrobatch microbatch;
    microbatch.tokens = packed_batch();
    microbatch.to_device(kElsewhere);
    CHECK(left_behind(microbatch.tokens, "tokens.").empty());
  }
  SECTION("dpo") {
    dpo::DpoMicrobatch microbatch;
    microbatch.pairs.forwards = {packed_batch(), packed_batch()};
    microbatch.pairs.shared_masks = {at::ones({2, 4}, at::kBool), at::ones({2, 4}, at::kBool)};
    microbatch.pairs.chosen_tokens = at::ones({2}, at::kLong);
    microbatch.pairs.rejected_tokens = at::ones({2}, at::kLong);
    microbatch.pairs.sequence_ids = at::zeros({2, 4}, at::kLong);
    microbatch.reference_parts = at::zeros({2, 4}, at::kDouble);
    microbatch.to_device(kElsewhere);
    std::vector<std::string> left;
    for (const sdk::TokenBatch& forward : microbatch.pairs.forwards) {
      for (const std::string& name : left_behind(forward, "forwards.")) left.push_back(name);
    }
    for (const at::Tensor& mask : microbatch.pairs.shared_masks) add_if_left(left, "shared_masks", mask);
    add_if_left(left, "chosen_tokens", microbatch.pairs.chosen_tokens);
    add_if_left(left, "rejected_tokens", microbatch.pairs.rejected_tokens);
    add_if_left(left, "sequence_ids", microbatch.pairs.sequence_ids);
    add_if_left(left, "reference_parts", microbatch.reference_parts);
    CHECK(left.empty());
  }
  SECTION("grpo") {
    grpo::GrpoMicrobatch microbatch;
    microbatch.tokens = packed_batch();
    at::Tensor* per_completion[] = {&microbatch.advantages, &microbatch.rewards, &microbatch.group_stds,
                                    &microbatch.lengths};
    for (at::Tensor* tensor : per_completion) *tensor = at::zeros({2}, at::kDouble);
    microbatch.old_log_probs = at::zeros({2, 4}, at::kDouble);
    microbatch.ref_log_probs = at::zeros({2, 4}, at::kDouble);
    microbatch.entropy_mask = at::ones({2, 4}, at::kBool);
    microbatch.function_rewards = at::zeros({2, 3}, at::kDouble);
    microbatch.truncated = at::zeros({2}, at::kBool);
    microbatch.to_device(kElsewhere);
    std::vector<std::string> left = left_behind(microbatch.tokens, "tokens.");
    add_if_left(left, "advantages", microbatch.advantages);
    add_if_left(left, "rewards", microbatch.rewards);
    add_if_left(left, "group_stds", microbatch.group_stds);
    add_if_left(left, "lengths", microbatch.lengths);
    add_if_left(left, "old_log_probs", microbatch.old_log_probs);
    add_if_left(left, "ref_log_probs", microbatch.ref_log_probs);
    add_if_left(left, "entropy_mask", microbatch.entropy_mask);
    add_if_left(left, "function_rewards", microbatch.function_rewards);
    add_if_left(left, "truncated", microbatch.truncated);
    CHECK(left.empty());
  }
}
