// Shared by the contract tests: a contract run through the command line's runner, and
// what a passing receipt must show.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "contracts/contracts.h"
#include "contracts/framework.h"

namespace kc::test {

inline RunResult run_contract_on(const std::string& contract, const std::string& backend, int cases,
                                 const std::string& filter = "") {
  Status st;
  auto be = select_backend(backend, &st);
  EXPECT_TRUE(be) << st.message;
  if (!be) return {};
  RunOptions o;
  o.cases = cases;
  o.quiet = true;
  o.filter = filter;
  return run_contract(*find_contract(contract), *be, o);
}

// Verdict pass, every gate ok, every control red.
inline void expect_pass(const RunResult& r) {
  EXPECT_TRUE(r.pass) << summary_table(r.receipt);
  for (const auto& c : r.receipt["controls"]) EXPECT_TRUE(c["red"].get<bool>()) << c.dump();
  for (const auto& g : r.receipt["gates"]) EXPECT_TRUE(g["ok"].get<bool>()) << g.dump();
}

// --filter on the cpu backend: of `cases` generated cases, `run` are run and the rest
// counted as filtered out.
inline void expect_filter_selects(const std::string& contract, const std::string& filter, int cases, int run) {
  const RunResult r = run_contract_on(contract, "cpu", cases, filter);
  EXPECT_EQ(r.receipt["cases"]["run"].get<int>(), run);
  EXPECT_EQ(r.receipt["cases"]["filtered_out"].get<int>(), cases - run);
}

}  // namespace kc::test
