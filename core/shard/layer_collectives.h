// The announce-and-drain protocol of sharding "full" (ZeRO-3) for every
// sharded model of a run: the policy and its frozen references
// (shard::ShardedLayers, one per model).
//
// A layer's gather and its gradients' reduce-scatter are collectives, but
// ranks issue different numbers of them: one has more microbatches, a longer
// generation or more evaluation examples than another. So each one is first
// announced to every rank in a small all-reduce ([1, code, code²] summed,
// the code naming the model, the operation and the layer): ranks that
// compute announce, and a rank that has reached its next other collective
// waits in drain(), announcing nothing and joining each announced operation
// with neutral inputs (its own chunk for a gather, zeros for a
// reduce-scatter) until every rank is draining. The run's other collectives
// go through a dist::DrainingCommunicator that calls drain() first, and a
// rank drains too before its first operation on another model than its
// last (one rank may still generate with the policy while another would
// score with a reward model): a meeting, which a rank in its final drain
// does not mistake for the end (every exchange says how many ranks are
// meeting). Two computing ranks announcing different
// operations (a plugin whose forwards differ by rank) get an sdk::Error, not
// a hang.
#pragma once

#include "core/dist/communicator.h"

#include <cstdint>
#include <map>

namespace ptrain::shard {

// kGather moves the weights of a layer's matrices in the model's compute
// dtype (dist::LayerShards::gather); kGatherExact moves float32 (a save).
enum class LayerOperation : int64_t { kGather = 0, kReduceScatter = 1, kGatherExact = 2 };

class LayerCollectives {
 public:
  // A sharded model: joins the operations its peers announce for it.
  class Participant {
   public:
    virtual ~Participant() = default;
    virtual void join(LayerOperation operation, size_t layer) = 0;
  };

  // `communicator` is the run's own (not a DrainingCommunicator over it) and outlives this object.
  explicit LayerCollectives(dist::Communicator& communicator) : communicator_(communicator) {}

  dist::Communicator& communicator() { return communicator_; }
  // Ids follow the order of registration, which is the same on every rank
  // (models are created by the same code everywhere).
  int add(Participant& participant);
  void remove(int id) { participants_.erase(id); }

  // Collective: this rank's next operation on participant `id`'s layer.
  void announce(int id, LayerOperation operation, size_t layer);
  // Collective: joins every operation the other ranks announce until all of them drain too.
  void drain();

 private:
  static constexpr int64_t kLayerSlots = 1 << 16;
  static constexpr int64_t kOperations = 3;
  // kFinal: before another collective, until every rank drains. kMeeting:
  // before another model's operations, until no rank computes; a rank in a
  // final drain then goes on joining the operations that follow.
  enum class Drain { kFinal, kMeeting };
  void wait_for_peers(Drain kind);
  static int64_t code_of(int id, LayerOperation operation, size_t layer);
  static std::string describe(int64_t code);

  dist::Communicator& communicator_;
  std::map<int, Participant*> participants_;
  int next_id_ = 0;
  int last_model_ = -1;  // of this rank's last announcement since all ranks drained; -1: none
};

}  // namespace ptrain::shard
