#include "core/dist/caught_signals.h"

namespace ptrain::dist {
namespace {

constexpr int kCaught[] = {SIGINT, SIGTERM, SIGUSR1};
volatile sig_atomic_t g_pending[sizeof kCaught / sizeof kCaught[0]] = {};

void remember_signal(int signal_number) {
  for (size_t i = 0; i < sizeof kCaught / sizeof kCaught[0]; ++i) {
    if (kCaught[i] == signal_number) g_pending[i] = 1;
  }
}

}  // namespace

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

}  // namespace ptrain::dist
