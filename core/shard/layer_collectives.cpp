#include "core/shard/layer_collectives.h"

#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace ptrain::shard {
namespace {

struct Announcements {
  int64_t count = 0;    // ranks announcing
  int64_t sum = 0;      // of their codes
  int64_t sum_sq = 0;   // of their squared codes: count·code² only when every code is the same
  int64_t waiting = 0;  // ranks meeting the others before more layer operations
  bool agree(int64_t code) const { return sum == count * code && sum_sq == count * code * code; }
};

Announcements exchange(dist::Communicator& communicator, int64_t count, int64_t code, int64_t waiting) {
  std::vector<at::Tensor> values{at::tensor({count, count * code, count * code * code, waiting}, at::kLong)};
  communicator.all_reduce_sum(values);
  const at::Tensor summed = values[0].contiguous();
  return {summed[0].item<int64_t>(), summed[1].item<int64_t>(), summed[2].item<int64_t>(), summed[3].item<int64_t>()};
}

const char* const kSameSequence =
    "every rank must run the same sequence of forwards (a plugin's forwards may depend on how many examples a rank "
    "has, not on which)";

}  // namespace

int LayerCollectives::add(Participant& participant) {
  participants_[next_id_] = &participant;
  return next_id_++;
}

int64_t LayerCollectives::code_of(int id, LayerOperation operation, size_t layer) {
  TORCH_CHECK(static_cast<int64_t>(layer) < kLayerSlots, "sharding \"full\": too many layers");
  return (kOperations * static_cast<int64_t>(id) + static_cast<int64_t>(operation)) * kLayerSlots +
         static_cast<int64_t>(layer);
}

std::string LayerCollectives::describe(int64_t code) {
  const int64_t slot = code / kLayerSlots;
  static const char* const kNames[kOperations] = {"gather", "gradient reduce-scatter", "float32 gather"};
  return std::string(kNames[slot % kOperations]) + " of layer " + std::to_string(code % kLayerSlots) +
         " of sharded model " + std::to_string(slot / kOperations);
}

void LayerCollectives::announce(int id, LayerOperation operation, size_t layer) {
  if (communicator_.world_size() == 1) return;
  // Ranks meet before another model's operations: one rank may still be
  // sampling longer rollouts from the policy while another would start
  // scoring its own with a reward model.
  if (last_model_ >= 0 && last_model_ != id) wait_for_peers(Drain::kMeeting);
  last_model_ = id;
  const int64_t code = code_of(id, operation, layer);
  if (!exchange(communicator_, 1, code, 0).agree(code)) {
    throw sdk::Error("sharding \"full\": rank " + std::to_string(communicator_.rank()) + " runs the " +
                     describe(code) + " while another rank runs a different layer operation; " + kSameSequence);
  }
}

void LayerCollectives::drain() {
  if (communicator_.world_size() == 1) return;
  wait_for_peers(Drain::kFinal);
}

void LayerCollectives::wait_for_peers(Drain kind) {
  for (;;) {
    const Announcements seen = exchange(communicator_, 0, 0, kind == Drain::kMeeting ? 1 : 0);
    if (seen.count == 0) {
      // Nobody computes. A meeting ends; a final drain ends only if no peer
      // is meeting (whose operations come next, to be joined).
      if (kind == Drain::kFinal && seen.waiting > 0) continue;
      last_model_ = -1;  // every rank is here: the next operation needs no meeting
      return;
    }
    const int64_t code = seen.sum / seen.count;
    if (!seen.agree(code)) {
      throw sdk::Error("sharding \"full\": ranks run different layer operations at once; " +
                       std::string(kSameSequence));
    }
    const auto found = participants_.find(static_cast<int>(code / kLayerSlots / kOperations));
    if (found == participants_.end()) {
      throw sdk::Error("sharding \"full\": a peer rank runs the " + describe(code) + ", which rank " +
                       std::to_string(communicator_.rank()) + " no longer holds");
    }
    found->second->join(static_cast<LayerOperation>((code / kLayerSlots) % kOperations),
                        static_cast<size_t>(code % kLayerSlots));
  }
}

}  // namespace ptrain::shard
