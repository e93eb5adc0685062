#include "fault_report.h"

#include "device_arena.h"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>

namespace ptrain::standin {
namespace {

struct sigaction g_previous_segv {};
struct sigaction g_previous_bus {};

// Async-signal-safe output: write(2) only.
void say(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void say_address(const void* address) {
  char text[2 + 16 + 1] = "0x";
  auto value = reinterpret_cast<uintptr_t>(address);
  for (int digit = 15; digit >= 0; --digit) {
    text[2 + digit] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  }
  text[18] = '\0';
  say(text);
}

void on_fault(int signal_number, siginfo_t* info, void* context) {
  (void)context;
  const bool fault = info != nullptr && info->si_code > 0;  // raised by the CPU, not sent
  if (fault && DeviceArena::instance().contains(info->si_addr)) {
    say("\nptrain stand-in device: the host read or wrote device memory at ");
    say_address(info->si_addr);
    say(": a device tensor's bytes were used on the host (data_ptr<T>() dereferenced, an accessor, memcpy); "
        "copy the tensor to the CPU first (.to(at::kCPU)). Backtrace:\n");
    void* frames[64];
    ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDERR_FILENO);
  }
  // The previous handler takes over: a fault recurs when the instruction
  // runs again; a sent signal is sent again.
  ::sigaction(signal_number, signal_number == SIGSEGV ? &g_previous_segv : &g_previous_bus, nullptr);
  if (!fault) ::raise(signal_number);
}

void arm(int signal_number, struct sigaction& previous) {
  struct sigaction current {};
  ::sigaction(signal_number, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == on_fault) return;
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(signal_number, &action, &previous);
}

}  // namespace

void arm_fault_report() {
  // backtrace() loads the unwinder on first use, which allocates: not in a handler.
  void* frame = nullptr;
  ::backtrace(&frame, 1);
  arm(SIGSEGV, g_previous_segv);
  arm(SIGBUS, g_previous_bus);
}

}  // namespace ptrain::standin
