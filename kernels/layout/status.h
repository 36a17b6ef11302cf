// Status: how launchers and backends report failure. Library code never exits; the
// command line decides what is fatal.
#pragma once
#include <string>
#include <utility>

namespace kc {

struct Status {
  bool ok = true;
  std::string message;
  static Status Ok() { return {}; }
  static Status Error(std::string msg) { return {false, std::move(msg)}; }
  explicit operator bool() const { return ok; }
};

#define KC_RETURN_IF_ERROR(expr)        \
  do {                                  \
    ::kc::Status kc_st_ = (expr);       \
    if (!kc_st_.ok) return kc_st_;      \
  } while (0)

}  // namespace kc
