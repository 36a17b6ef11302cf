// Shared by the contract tests: a contract run through the command line's runner, and
// what a passing receipt must show.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "contracts/contracts.h"
#include "contracts/framework.h"
#include "kernels/backend/forwarding.h"
#include "kernels/layout/kv_layout.h"

namespace kc::test {

// A quiet run of `contract` on `backend`: `cases` generated cases (none: the contract's
// default), those `filter` selects; gates_only skips the controls.
inline RunResult run_contract_on(const std::string& contract, const std::string& backend, std::optional<int> cases,
                                 const std::string& filter = "", bool gates_only = false) {
  Status st;
  auto be = select_backend(backend, &st);
  EXPECT_TRUE(be) << st.message;
  if (!be) return {};
  RunOptions o;
  o.cases = cases;
  o.quiet = true;
  o.filter = filter;
  o.gates_only = gates_only;
  return run_contract(*find_contract(contract), *be, o);
}

// A quiet run of `contract` on the cpu backend seen through the decorator Decorated (built
// over the cpu backend: a ForwardingBackend, or EngineDecorated-like): `cases` generated
// cases, those `filter` selects; gates_only skips the controls.
template <class Decorated>
RunResult run_cpu_through(const std::string& contract, int cases, const std::string& filter, bool gates_only = false) {
  Status st;
  auto cpu = select_backend("cpu", &st);
  EXPECT_TRUE(cpu) << st.message;
  if (!cpu) return {};
  Decorated d(*cpu);
  RunOptions o;
  o.cases = cases;
  o.quiet = true;
  o.filter = filter;
  o.gates_only = gates_only;
  return run_contract(*find_contract(contract), d, o);
}

// The failed count of the receipt's gate `gate`; -1 where the receipt has no such gate.
inline int64_t gate_failed(const RunResult& r, const std::string& gate) {
  for (const auto& g : r.receipt["gates"])
    if (g["name"] == gate) return g["failed"].get<int64_t>();
  return -1;
}

// Verdict pass, every gate ok, every control red.
inline void expect_pass(const RunResult& r) {
  EXPECT_TRUE(r.pass) << summary_table(r.receipt);
  for (const auto& c : r.receipt["controls"]) EXPECT_TRUE(c["red"].get<bool>()) << c.dump();
  for (const auto& g : r.receipt["gates"]) EXPECT_TRUE(g["ok"].get<bool>()) << g.dump();
}

// Each control is red through the gate it exists for (its caught_by names that gate, among any
// others): a fault that stopped faulting as designed (a "nondeterministic" decode that flips
// the same way every call, a stray write that lands inside the output) can leave its control
// red through another gate alone (host mutation sweep, round 6). `target` maps every control
// of the receipt to its gate; a control it does not name fails the test.
template <class Receipt>  // a RunResult's receipt (kc::Receipt) or its JSON
void expect_controls_red_through(const Receipt& receipt, const std::map<std::string, std::string>& target) {
  EXPECT_EQ(receipt["controls"].size(), target.size());
  for (const auto& c : receipt["controls"]) {
    const std::string name = c["name"];
    const auto it = target.find(name);
    if (it == target.end()) {
      ADD_FAILURE() << "control " << name << " has no target gate in this test";
      continue;
    }
    const nlohmann::json& by = c["caught_by"];
    EXPECT_NE(std::find(by.begin(), by.end(), it->second), by.end())
        << name << " is red, but not through " << it->second << ": caught by " << by.dump();
  }
}

// The controls the row-codec harness gives every row-codec contract (contracts/codec_harness.cpp)
// and the refusal controls, with their gates; a contract adds its own.
inline std::map<std::string, std::string> codec_control_gates(std::map<std::string, std::string> own) {
  std::map<std::string, std::string> t = {
      {"swapped-page-table", "paged==window"}, {"planted-row", "paged==window"},     {"stray-write", "guards"},
      {"encode-writes-its-input", "inputs"},   {"launch-dependent-encode", "rows==solo"},
      {"nondeterministic-decode", "repeats"},  {"decode-writes-the-cache", "inputs"},
      {"refusal-accepts-one-past", "refusals"}, {"refusal-unnamed", "refusals"},     {"refusal-writes-first", "refusals"},
      {"refusal-writes-output-first", "refusals"}, {"refusal-paged-edge-accepted", "refusals"}};
  t.insert(own.begin(), own.end());
  return t;
}

// A row codec's encode that flips the lowest bit of the first byte of the launch's last row,
// in whichever cache it writes (paged and window alike), where the launch has at least
// kMinRows rows. kField scales: fp8's fp32 scale one ulp off, q4's first group scale in its
// lowest mantissa bit, mxfp4's first exponent (the scale gates must see it); codes: the first
// code byte (with kMinRows 2, a launch-dependent encode: rows==solo must see it). Host mutation
// sweep, round 15.
enum class RowField { codes, scales };
template <RowField kField, int kMinRows>
class LastRowBitEncodeBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* r, int n) override {
    const Status st = ForwardingBackend::encode_rows(f, c, x, r, n);
    if (st.ok && n >= kMinRows) {
      const RowRef& last = r[n - 1];
      const KvView v = c.view(last.lane);
      (kField == RowField::scales ? kv_scale(v, last.layer, last.kv, last.head, last.pos)
                                  : kv_row(v, last.layer, last.kv, last.head, last.pos))[0] ^= 0x01;
    }
    return st;
  }
};
using LastRowScaleBitEncodeBackend = LastRowBitEncodeBackend<RowField::scales, 1>;

// Flips the lowest bit of *x (one ulp for a normal float, a sign-keeping change for any).
inline void flip_lowest_bit(float* x) {
  uint32_t u;
  std::memcpy(&u, x, 4);
  u ^= 1u;
  std::memcpy(x, &u, 4);
}

// An attention whose output Edit::apply(cache, params, rows, n, out) alters after the real
// attention ran and succeeded: the attention decorators of the contract tests (a row of a
// batch one bit off, an empty row's -0, a head doubled, a NaN).
template <class Edit>
class AttentionEditBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    const Status st = ForwardingBackend::attention(c, p, rows, n, tails, q, out);
    if (st.ok) Edit::apply(c, p, rows, n, out);
    return st;
  }
};

// A rope store whose stored cache or rotated queries Edit::apply(cache, params, rows, n, q_out)
// alters after the real store ran and succeeded (q_out may be null).
template <class Edit>
class RopeStoreEditBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    const Status st = ForwardingBackend::rope_store(c, p, rows, n, q, k, v, q_out);
    if (st.ok) Edit::apply(c, p, rows, n, q_out);
    return st;
  }
};

// --filter on the cpu backend: of `cases` generated cases, `run` are run and the rest
// counted as filtered out.
inline void expect_filter_selects(const std::string& contract, const std::string& filter, int cases, int run) {
  const RunResult r = run_contract_on(contract, "cpu", cases, filter);
  EXPECT_EQ(r.receipt["cases"]["run"].get<int>(), run);
  EXPECT_EQ(r.receipt["cases"]["filtered_out"].get<int>(), cases - run);
}

}  // namespace kc::test
