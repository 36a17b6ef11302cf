// Holding off the signals that end a run by default while a write is under way, so that a
// Ctrl-C or a kill leaves the earlier files or the new ones, and no temp file.
#pragma once

#include <csignal>
#include <iterator>

namespace kc {

// While a HoldSignals lives, SIGINT, SIGTERM, SIGHUP and SIGQUIT are noted, not acted on; its
// destructor puts back the dispositions it found and raises the noted signal under them (the
// default ends the process there). A signal ignored when the hold begins stays ignored (nohup, a
// background job's SIGINT) and is never noted. A long write polls held() and
// stops early (make-model's tensors), undoing what it wrote before the hold ends. Holds nest:
// an inner one's raise is noted by the outer one. A handler that only notes the signal works
// whichever thread the kernel hands it to, where blocking the signals in the writing thread
// would not (the CUDA runtime's threads would take them). SIGKILL cannot be held off.
class HoldSignals {
 public:
  HoldSignals();
  ~HoldSignals();
  HoldSignals(const HoldSignals&) = delete;
  HoldSignals& operator=(const HoldSignals&) = delete;
  // The signal noted since the outermost hold began, 0 when none.
  static int held();

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  struct sigaction old_[std::size(kSignals)] {};
  bool set_[std::size(kSignals)] {};
};

}  // namespace kc
