#include "contracts/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace kc::progress {
namespace {

struct State {
  std::string label;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  bool shown = false;  // a live status line is on the terminal now
};
State& state() {
  static State s;
  return s;
}

int terminal_width() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

}  // namespace

bool live() {
  static const bool is_live = [] {
    const char* force = std::getenv("KC_PROGRESS");
    if (force && std::strcmp(force, "live") == 0) return true;
    if (force && std::strcmp(force, "plain") == 0) return false;
    const char* term = std::getenv("TERM");
    return isatty(STDERR_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
  }();
  return is_live;
}

std::string status_text(const std::string& label, const std::string& what, double elapsed_s, int width) {
  std::ostringstream t;
  t << std::fixed << std::setprecision(1) << elapsed_s << " s";
  // The elapsed time is kept whole; the description is cut when the line is too long.
  std::string head = label.empty() ? std::string() : label + ": ";
  std::string s = head + what;
  const std::string tail = " (" + t.str() + ")";
  if (width > 0 && int(s.size() + tail.size()) > width) {
    const int keep = width - int(tail.size()) - 3;
    s = keep > 0 ? s.substr(0, size_t(keep)) + "..." : std::string();
  }
  return s + tail;
}

void begin(const std::string& label) {
  clear();
  state().label = label;
  state().t0 = std::chrono::steady_clock::now();
}

void update(const std::string& what) {
  State& s = state();
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.t0).count();
  if (live()) {
    // -1: the cursor stays on the line without wrapping it.
    std::cerr << "\r\033[K" << status_text(s.label, what, el, terminal_width() - 1) << std::flush;
    s.shown = true;
  } else {
    // The plain line ends with the case line as printed, so it can be pasted into --case.
    std::cerr << "  .. " << what << "\n";
  }
}

void clear() {
  State& s = state();
  if (s.shown) {
    std::cerr << "\r\033[K" << std::flush;
    s.shown = false;
  }
}

void end() {
  clear();
  state().label.clear();
}

}  // namespace kc::progress
