// What every receipt shares, whoever writes or reads it (the contract runner, the benches,
// report and diff): the schema name, the head fields, a gate's status in words, and the
// way numbers that are compared with 1 are printed.
#pragma once
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc {

inline constexpr const char* kReceiptSchema = "kernel-contracts/receipt/1";

// A gate's result in words (console, receipt, report, diff):
//   ok       at least one check passed and none failed;
//   FAIL     a check failed;
//   skipped  no check ran and some were skipped (skip_reason says why, e.g. no device);
//   not run  declared, but no selected case reached it.
inline const char* gate_status(int64_t passed, int64_t failed, int64_t skipped) {
  if (failed > 0) return "FAIL";
  if (passed > 0) return "ok";
  return skipped > 0 ? "skipped" : "not run";
}

// A receipt gate's status: its counts decide (a stored "status" must agree with them;
// report and diff check that).
inline std::string receipt_gate_status(const nlohmann::json& g) {
  auto count = [&](const char* k) {
    return g.contains(k) && g[k].is_number_integer() ? g[k].get<int64_t>() : int64_t(0);
  };
  return gate_status(count("passed"), count("failed"), count("skipped"));
}

// The seed as it was given (an unsigned 64-bit number), or "none" for a run without a
// generator (a bench: seed null).
inline std::string receipt_seed_text(const nlohmann::json& r) {
  const auto it = r.find("seed");
  if (it == r.end() || it->is_null()) return "none";
  if (it->is_number_unsigned()) return std::to_string(it->get<uint64_t>());
  return it->dump();
}

// A ratio with 4 significant digits, or more where 4 would round a value across 1
// (0.9999990 prints as 0.999999, never as 1).
inline std::string format_ratio(double x) {
  if (std::isnan(x)) return "nan";
  for (int p = 4; p <= 17; ++p) {
    std::ostringstream o;
    o << std::setprecision(p) << x;
    double back = 0;
    std::istringstream(o.str()) >> back;
    if ((x < 1) == (back < 1) && (x > 1) == (back > 1)) return o.str();
  }
  std::ostringstream o;
  o << std::setprecision(17) << x;
  return o.str();
}

}  // namespace kc
