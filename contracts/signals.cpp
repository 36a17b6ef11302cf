#include "contracts/signals.h"

namespace kc {

namespace {
volatile sig_atomic_t g_held_signal = 0;
extern "C" void kc_note_held_signal(int sig) { g_held_signal = sig; }
}  // namespace

HoldSignals::HoldSignals() {
  struct sigaction sa {};
  sa.sa_handler = kc_note_held_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    // An ignored signal stays ignored (nohup, a background job's SIGINT): noting it would stop a
    // write that the one who started the run told to ignore it.
    if (::sigaction(kSignals[i], nullptr, &old_[i]) != 0 || old_[i].sa_handler == SIG_IGN) continue;
    set_[i] = ::sigaction(kSignals[i], &sa, nullptr) == 0;
  }
}

HoldSignals::~HoldSignals() {
  for (size_t i = 0; i < std::size(kSignals); ++i)
    if (set_[i]) ::sigaction(kSignals[i], &old_[i], nullptr);
  const int sig = g_held_signal;
  g_held_signal = 0;
  if (sig) ::raise(sig);
}

int HoldSignals::held() { return g_held_signal; }

}  // namespace kc
