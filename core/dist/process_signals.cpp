#include "core/dist/process_signals.h"

#include "ptrain/sdk/errors.h"

#include <cstring>
#include <ctime>
#include <string>

namespace ptrain::dist {
namespace {

constexpr int kCaught[] = {SIGINT, kStopSignals[0], kStopSignals[1]};
volatile sig_atomic_t g_pending[sizeof kCaught / sizeof kCaught[0]] = {};

void remember_signal(int signal_number) {
  for (size_t i = 0; i < sizeof kCaught / sizeof kCaught[0]; ++i) {
    if (kCaught[i] == signal_number) g_pending[i] = 1;
  }
}

// How often the watcher looks up from its wait to see whether it should end.
constexpr long kWatchSliceNs = 100L * 1000 * 1000;

}  // namespace

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

CaughtSignals::CaughtSignals() {
  struct sigaction action {};
  action.sa_handler = remember_signal;
  ::sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int signal_number : kCaught) ::sigaction(signal_number, &action, nullptr);
}

int CaughtSignals::take() {
  for (size_t i = 0; i < sizeof kCaught / sizeof kCaught[0]; ++i) {
    if (g_pending[i] != 0) {
      g_pending[i] = 0;
      return kCaught[i];
    }
  }
  return 0;
}

WatchedSignals::WatchedSignals() {
  ::sigemptyset(&signals_);
  for (const int signal_number : kStopSignals) ::sigaddset(&signals_, signal_number);
  const int error = ::pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  if (error != 0) throw sdk::Error(std::string("cannot block SIGTERM and SIGUSR1: ") + std::strerror(error));
  watcher_ = std::thread([this] { watch(); });
}

WatchedSignals::~WatchedSignals() {
  closing_ = true;
  watcher_.join();
}

void WatchedSignals::watch() {
  const timespec slice{0, kWatchSliceNs};
  while (!closing_) {
    const int signal_number = ::sigtimedwait(&signals_, nullptr, &slice);
    if (signal_number <= 0) continue;  // the slice ended (EAGAIN), or EINTR
    int none = 0;
    received_.compare_exchange_strong(none, signal_number);  // the first one is the one to tell
  }
}

}  // namespace ptrain::dist
