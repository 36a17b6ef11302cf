// JUnit XML for CI test reporters (`--junit FILE` on contracts, kernel-contract, serve-gate
// and premerge). The common format: <testsuites> of <testsuite>, each of <testcase> with
// <failure>, <error> or <skipped>. A receipt becomes one suite:
//   a gate      one testcase: failure when a check failed (the first failing cases in the
//               text), skipped when no check ran (the reason, or "not run");
//   a control   one testcase: failure when it stayed green (the gates are blind to it);
//   a target    (bench) one testcase: failure when measured and not met, skipped when
//               not measured;
//   errors      one testcase with an <error> when the receipt lists backend errors;
//   verdict     one testcase: failure when the verdict is fail, its reasons in the text.
// tests/tools/junit.xsd is the schema the output is checked against.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/layout/status.h"

namespace kc {

struct JunitCase {
  JunitCase(std::string name_, std::string classname_, double time = 0)
      : name(std::move(name_)), classname(std::move(classname_)), time_s(time) {}
  std::string name;
  std::string classname;
  double time_s = 0;
  enum class Result { passed, failure, error, skipped } result = Result::passed;
  std::string message;  // failure / error / skipped message attribute
  std::string text;     // failure / error body
};

struct JunitSuite {
  std::string name;
  double time_s = 0;
  std::string timestamp;  // ISO 8601, empty when unknown
  std::string hostname;
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<JunitCase> cases;
  std::string system_out;
};

// A receipt (checked by Receipt::load, or just written by the tool) as a suite.
JunitSuite junit_suite(const nlohmann::json& receipt);
// The document: <testsuites name=...> with the totals, then every suite.
std::string junit_xml(const std::string& name, const std::vector<JunitSuite>& suites);
// XML escaping of an attribute value (attribute: newlines and tabs as character
// references) or of element text; bytes that XML 1.0 cannot carry (control characters,
// invalid UTF-8) become '?'.
std::string xml_escape(const std::string& s, bool attribute = true);

// Checks --junit FILE before a run (prepare_output); the message names the option.
bool junit_writable(const std::string& path, std::string* why);
// Writes the suites of `receipts` to path (the document named `name`).
Status write_junit(const std::string& path, const std::string& name, const std::vector<nlohmann::json>& receipts);
// The XML write_junit writes (to write it together with the receipts: write_files_atomic).
std::string junit_text(const std::string& name, const std::vector<nlohmann::json>& receipts);

}  // namespace kc
