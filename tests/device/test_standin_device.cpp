// The stand-in device itself (docs/devices.md): its tensors hold their values
// through copies, views and resizes; a host tensor meeting one fails with
// CUDA's error; reading its memory on the host kills the process with a
// message that says so.
#include "catch.h"

#include "device_test_support.h"

#include <ATen/ATen.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

namespace {

using ptrain::testing::stand_in;

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "(no error)";
}

// Runs `action` in a child process; returns how it ended and what it wrote
// to stderr. The child has 30 s before SIGALRM ends it.
struct ChildEnd {
  int signal = 0;  // 0: it exited
  std::string stderr_text;
};

ChildEnd run_in_child(const std::function<void()>& action) {
  int pipe_ends[2];
  REQUIRE(::pipe(pipe_ends) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_ends[0]);
    ::dup2(pipe_ends[1], STDERR_FILENO);
    ::alarm(30);
    action();
    ::_exit(0);
  }
  ::close(pipe_ends[1]);
  ChildEnd end;
  char buffer[4096];
  for (ssize_t count; (count = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;) end.stderr_text.append(buffer, count);
  ::close(pipe_ends[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) end.signal = WTERMSIG(status);
  return end;
}

}  // namespace

TEST_CASE("stand-in tensors keep their values through copies, views and resizes", "[device]") {
  const at::Device device = stand_in();
  const at::Tensor host = at::arange(12, at::kFloat).reshape({3, 4});
  const at::Tensor on_device = host.to(device);
  CHECK(on_device.device() == device);
  CHECK(at::equal(on_device.to(at::kCPU), host));
  // Strided copies both ways, with a dtype change on the way.
  CHECK(at::equal(on_device.t().to(at::kCPU), host.t()));
  CHECK(at::equal(host.t().to(device, at::kDouble).to(at::kCPU), host.t().to(at::kDouble)));
  CHECK(at::equal(host.to(device, at::kBFloat16).to(at::kCPU), host.to(at::kBFloat16)));
  // Views write through to their base.
  at::Tensor base = at::zeros({3, 4}, at::TensorOptions().device(device));
  base.view({12}).narrow(0, 4, 4).fill_(7.0);
  base.select(1, 0).copy_(at::ones({3}));
  at::Tensor expected = at::zeros({3, 4});
  expected.view({12}).narrow(0, 4, 4).fill_(7.0);
  expected.select(1, 0).fill_(1.0);
  CHECK(at::equal(base.to(at::kCPU), expected));
  // Growing keeps the bytes there were; kernels compute as on the CPU.
  at::Tensor grown = on_device.flatten().clone();
  grown.resize_({16});
  CHECK(at::equal(grown.narrow(0, 0, 12).to(at::kCPU), host.flatten()));
  CHECK(at::allclose(at::mm(on_device, on_device.t()).to(at::kCPU), at::mm(host, host.t())));
  CHECK((on_device.sum() == 66.0).item<bool>());
}

TEST_CASE("a host tensor meeting a stand-in tensor fails as on CUDA, a host number does not", "[device]") {
  const at::Device device = stand_in();
  const at::Tensor on_device = at::ones({2, 3}, at::TensorOptions().device(device));
  const at::Tensor host = at::ones({2, 3});
  for (const auto& [what, action] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"add", [&] { (void)(on_device + host); }},
           {"where", [&] { (void)at::where(host.gt(0), on_device, on_device); }},
           {"mm", [&] { (void)at::mm(on_device, host.t()); }},
           {"cat",
            [&] {
              (void)at::cat({on_device, host});
            }},
           {"index_select", [&] { (void)on_device.index_select(0, at::zeros({1}, at::kLong)); }}}) {
    INFO(what);
    CHECK_THAT(error_of(action), Catch::Contains("Expected all tensors to be on the same device") &&
                                     Catch::Contains("privateuseone:0 and cpu"));
  }
  // A 0-dim host tensor is a number, and indexing takes host indices, as on CUDA.
  CHECK((on_device * at::scalar_tensor(2.0)).device() == device);
  CHECK((at::scalar_tensor(2.0) * on_device).device() == device);
  CHECK(on_device.index({at::zeros({1}, at::kLong)}).device() == device);
}

TEST_CASE("reading stand-in memory on the host kills the process and says where", "[device]") {
  const at::Device device = stand_in();
  const at::Tensor on_device = at::ones({4}, at::TensorOptions().device(device));
  const ChildEnd end = run_in_child([&] {
    volatile float first = *on_device.data_ptr<float>();
    (void)first;
  });
  INFO(end.stderr_text);
  CHECK(end.signal == SIGSEGV);
  CHECK_THAT(end.stderr_text, Catch::Contains("the host read or wrote device memory") &&
                                  Catch::Contains("copy the tensor to the CPU first"));
  // A copy to the host first is what reads it.
  CHECK(on_device.to(at::kCPU).data_ptr<float>()[0] == 1.0f);
}
