#include "core/dist/caught_signals.h"

namespace ptrain::dist {
namespace {

volatile sig_atomic_t g_received_signal = 0;

void remember_signal(int signal_number) { g_received_signal = signal_number; }

}  // namespace

CaughtSignals::CaughtSignals() {
  struct sigaction action {};
  action.sa_handler = remember_signal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &previous_int_);
  ::sigaction(SIGTERM, &action, &previous_term_);
}

CaughtSignals::~CaughtSignals() {
  ::sigaction(SIGINT, &previous_int_, nullptr);
  ::sigaction(SIGTERM, &previous_term_, nullptr);
}

int CaughtSignals::take() {
  const int signal_number = g_received_signal;
  if (signal_number != 0) g_received_signal = 0;
  return signal_number;
}

}  // namespace ptrain::dist
