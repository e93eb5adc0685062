#include "core/dist/c10d_communicator.h"

#include "core/dist/c10d_compat.h"
#include "core/dist/rendezvous.h"
#include "ptrain/sdk/errors.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#ifdef PTRAIN_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef PTRAIN_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace ptrain::dist {
namespace {

using Clock = std::chrono::steady_clock;

// The first line of an exception's text (c10 appends a C++ backtrace).
std::string first_line(const std::exception& error) {
  const std::string text = error.what();
  return text.substr(0, text.find('\n'));
}

class C10dCommunicator;

class C10dPending final : public PendingCollective {
 public:
  // `results` are the caller's tensors, `staged` those the collective works on
  // (the same tensors unless they were staged on a GPU).
  C10dPending(c10::intrusive_ptr<c10d::Work> work, C10dCommunicator& owner, std::string operation,
              std::vector<at::Tensor> results, std::vector<at::Tensor> staged)
      : work_(std::move(work)),
        owner_(owner),
        operation_(std::move(operation)),
        results_(std::move(results)),
        staged_(std::move(staged)) {}
  void wait() override;

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  C10dCommunicator& owner_;
  std::string operation_;
  std::vector<at::Tensor> results_;
  std::vector<at::Tensor> staged_;
};

class C10dCommunicator final : public Communicator {
 public:
  C10dCommunicator(const LaunchEnv& launch, std::chrono::seconds timeout, at::Device device)
      : launch_(launch), timeout_(timeout) {
    store_ = rendezvous(launch, timeout);
    guard("connecting the process group", [&] {
      if (device.is_cuda()) {
#ifdef PTRAIN_WITH_CUDA
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout;
        group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, launch.rank, launch.world_size, options);
        device_ = device;
        return;
#else
        throw sdk::Error("runtime.device is " + device.str() +
                         " but this ptrain was built without PTRAIN_WITH_CUDA (no NCCL): scripts/build-gpu.sh");
#endif
      }
#ifdef PTRAIN_HAVE_GLOO
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      // One Gloo worker thread: collectives are issued in order, and the
      // intra-op threads need the cores.
      options->threads = 1;
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, launch.rank, launch.world_size, options);
#else
      throw sdk::Error("several ranks on the CPU need Gloo, and this ptrain was built without its headers "
                       "(install libgloo-dev and rebuild, or set runtime.device = \"cuda\")");
#endif
    });
  }

  int rank() const override { return launch_.rank; }
  int world_size() const override { return launch_.world_size; }
  int local_rank() const override { return launch_.local_rank; }
  int local_world_size() const override { return launch_.local_world_size; }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override { all_reduce_sum_async(tensors)->wait(); }

  void all_reduce_max(std::vector<at::Tensor>& tensors) override {
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    std::vector<at::Tensor> staged = stage(tensors);
    C10dPending(start("all_reduce(max)", [&] { return group_->allreduce(staged, options); }), *this, "all_reduce(max)",
                tensors, staged)
        .wait();
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root_rank) override {
    c10d::BroadcastOptions options;
    options.rootRank = root_rank;
    std::vector<at::Tensor> staged = stage(tensors);
    C10dPending(start("broadcast", [&] { return group_->broadcast(staged, options); }), *this, "broadcast", tensors,
                staged)
        .wait();
  }

  void barrier() override {
    C10dPending(start("barrier", [&] { return group_->barrier(); }), *this, "barrier", {}, {}).wait();
  }

  std::unique_ptr<PendingCollective> all_reduce_sum_async(std::vector<at::Tensor>& tensors) override {
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    std::vector<at::Tensor> staged = stage(tensors);
    return std::make_unique<C10dPending>(start("all_reduce(sum)", [&] { return group_->allreduce(staged, options); }),
                                         *this, "all_reduce(sum)", tensors, staged);
  }

  std::unique_ptr<PendingCollective> reduce_scatter_sum_async(at::Tensor& input, at::Tensor& output) override {
    const std::string operation = "reduce_scatter(sum)";
    if (has_tensor_collectives()) {
      c10d::ReduceScatterOptions options;
      options.reduceOp = c10d::ReduceOp::SUM;
      return std::make_unique<C10dPending>(
          start(operation, [&] { return group_->_reduce_scatter_base(output, input, options); }), *this, operation,
          std::vector<at::Tensor>{}, std::vector<at::Tensor>{});
    }
    // Emulated: the whole sum on every rank, then this rank's chunk of it.
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    std::vector<at::Tensor> whole{input};
    const int64_t chunk = output.numel();
    return std::make_unique<C10dPending>(start(operation, [&] { return group_->allreduce(whole, options); }), *this,
                                         operation, std::vector<at::Tensor>{output},
                                         std::vector<at::Tensor>{input.narrow(0, chunk * launch_.rank, chunk)});
  }

  std::unique_ptr<PendingCollective> all_gather_async(at::Tensor& input, at::Tensor& output) override {
    const std::string operation = "all_gather";
    if (has_tensor_collectives()) {
      return std::make_unique<C10dPending>(start(operation, [&] { return group_->_allgather_base(output, input); }),
                                           *this, operation, std::vector<at::Tensor>{}, std::vector<at::Tensor>{});
    }
    // Emulated: a SUM of zeros and each rank's own chunk, exact in any order.
    output.zero_();
    output.narrow(0, input.numel() * launch_.rank, input.numel()).copy_(input);
    std::vector<at::Tensor> whole{output};
    return all_reduce_sum_async(whole);
  }

  double collective_seconds() const override { return collective_seconds_; }

  // Runs `action`, turning any failure into an sdk::Error naming the rank and operation.
  void guard(const std::string& operation, const std::function<void()>& action) {
    try {
      action();
    } catch (const sdk::Error&) {
      throw;
    } catch (const std::exception& error) {
      throw sdk::Error("rank " + std::to_string(launch_.rank) + " of " + std::to_string(launch_.world_size) + ": " +
                       operation + " failed (a peer rank may have died or hung; timeout " +
                       std::to_string(timeout_.count()) + " s): " + first_line(error) + silent_peers());
    }
  }

  void add_wait_time(double seconds) { collective_seconds_ += seconds; }

 private:
  // NCCL's, and Gloo's where this LibTorch has them; else emulated.
  bool has_tensor_collectives() const { return device_.is_cuda() || c10d_compat::kGlooHasTensorCollectives; }

  // NCCL reduces device tensors: the host tensors the core passes are staged
  // on this rank's GPU and copied back when the collective completes. Gloo
  // works on them in place.
  std::vector<at::Tensor> stage(const std::vector<at::Tensor>& tensors) const {
    if (device_.is_cpu()) return tensors;
    std::vector<at::Tensor> staged;
    for (const at::Tensor& tensor : tensors) staged.push_back(tensor.to(device_));
    return staged;
  }

  // After a failure: every rank whose collective fails says so in the store,
  // and a peer that stays silent for a short grace is the one that hung or
  // died — the rank a timeout alone cannot name. Costs nothing until then.
  std::string silent_peers() {
    if (!store_) return "";  // the rendezvous itself failed
    constexpr auto kGrace = std::chrono::seconds(2);
    const auto key = [](int rank) { return "ptrain/failed/rank" + std::to_string(rank); };
    try {
      store_->set(key(launch_.rank), std::vector<uint8_t>{1});
      std::vector<int> silent;
      const auto deadline = Clock::now() + kGrace;
      do {
        silent.clear();
        for (int rank = 0; rank < launch_.world_size; ++rank) {
          if (rank != launch_.rank && !store_->check({key(rank)})) silent.push_back(rank);
        }
        if (silent.empty() || Clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      } while (true);
      if (silent.empty()) return "";
      std::string names;
      for (const int rank : silent) names += (names.empty() ? "" : ", ") + std::to_string(rank);
      return "; no word from rank " + names + " within " + std::to_string(kGrace.count()) +
             " s of this failure: it hung or died";
    } catch (const std::exception&) {
      return "; " + store_gone_message(launch_);
    }
  }

  c10::intrusive_ptr<c10d::Work> start(const std::string& operation,
                                       const std::function<c10::intrusive_ptr<c10d::Work>()>& launch) {
    c10::intrusive_ptr<c10d::Work> work;
    guard(operation, [&] { work = launch(); });
    return work;
  }

  LaunchEnv launch_;
  std::chrono::seconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d_compat::CollectiveGroup> group_;
  at::Device device_ = at::kCPU;
  double collective_seconds_ = 0.0;
};

void C10dPending::wait() {
  const auto start = Clock::now();
  owner_.guard(operation_, [&] { work_->wait(); });
  for (size_t i = 0; i < results_.size(); ++i) {
    if (!results_[i].is_same(staged_[i])) results_[i].copy_(staged_[i]);
  }
  owner_.add_wait_time(std::chrono::duration<double>(Clock::now() - start).count());
}

bool process_group_at_world_size_one() {
  const char* wanted = std::getenv("PTRAIN_TEST_PROCESS_GROUP");
  return wanted != nullptr && std::string_view(wanted) == "1";
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(const LaunchEnv& launch, std::chrono::seconds timeout,
                                                at::Device device) {
  if (launch.world_size == 1 && !process_group_at_world_size_one()) return make_single_process_communicator();
  return std::make_unique<C10dCommunicator>(launch, timeout, device);
}

}  // namespace ptrain::dist
