#include "tools/junit.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "contracts/framework.h"
#include "contracts/receipt.h"

namespace kc {
namespace {

using json = nlohmann::json;

std::string str(const json& o, const char* k) {
  return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string();
}
double num(const json& o, const char* k) { return o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0; }
int64_t count(const json& o, const char* k) {
  return o.contains(k) && o[k].is_number_integer() ? o[k].get<int64_t>() : 0;
}
std::string lines(const json& a, size_t most = 20) {
  std::string s;
  if (!a.is_array()) return s;
  size_t n = 0;
  for (const auto& x : a) {
    if (n++ == most) {
      s += "... " + std::to_string(a.size() - most) + " more\n";
      break;
    }
    s += (x.is_string() ? x.get<std::string>() : x.dump()) + "\n";
  }
  return s;
}
std::string seconds(double s) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3) << (s > 0 ? s : 0.0);
  return o.str();
}

// Length of the UTF-8 sequence at s[i] of a character XML 1.0 allows, 0 otherwise: well-formed
// (utf8_length_at) and not U+FFFE or U+FFFF (EF BF BE, EF BF BF). Control bytes are the caller's.
size_t utf8_len(const std::string& s, size_t i) {
  const size_t n = utf8_length_at(s, i);
  if (n == 3 && uint8_t(s[i]) == 0xEF && uint8_t(s[i + 1]) == 0xBF && uint8_t(s[i + 2]) >= 0xBE) return 0;
  return n;
}

}  // namespace

std::string xml_escape(const std::string& s, bool attribute) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_len(s, i);
    if (n == 0 || (b < 0x20 && b != '\t' && b != '\n' && b != '\r')) {
      o += '?';
      ++i;
      continue;
    }
    if (n > 1) {
      o.append(s, i, n);
      i += n;
      continue;
    }
    if (!attribute && (s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) {
      o += s[i++];
      continue;
    }
    switch (s[i]) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      case '\n': o += "&#10;"; break;  // kept in attribute values, harmless in text
      case '\r': o += "&#13;"; break;
      case '\t': o += "&#9;"; break;
      default: o += s[i];
    }
    ++i;
  }
  return o;
}

JunitSuite junit_suite(const json& r) {
  JunitSuite s;
  const std::string name = str(r, "name");
  s.name = name + " (" + str(r, "kind") + ", " + str(r, "backend") + ")";
  s.time_s = r.contains("timings") ? num(r["timings"], "total_s") : 0;
  s.timestamp = str(r, "started_at");
  if (!s.timestamp.empty() && s.timestamp.back() == 'Z') s.timestamp.pop_back();  // xs:dateTime without zone, as readers expect
  s.hostname = str(r, "host");
  if (r.contains("device") && r["device"].is_object()) s.properties.push_back({"device", str(r["device"], "name")});
  if (r.contains("git") && r["git"].is_object())
    s.properties.push_back(
        {"commit", str(r["git"], "commit") + (r["git"].value("dirty", false) ? " (dirty)" : "")});
  s.properties.push_back({"seed", Receipt(r).seed_text()});
  if (r.contains("cases") && r["cases"].is_object() && r["cases"].contains("shard"))
    s.properties.push_back({"shard", str(r["cases"], "shard")});
  std::string argv;
  if (r.contains("argv") && r["argv"].is_array())
    for (const auto& a : r["argv"]) argv += (argv.empty() ? "" : " ") + shell_quote(a.is_string() ? a.get<std::string>() : a.dump());
  s.properties.push_back({"command", argv});
  const std::string cls = name;
  if (r.contains("gates") && r["gates"].is_array())
    for (const auto& g : r["gates"]) {
      JunitCase c{"gate " + str(g, "name"), cls + ".gates", num(g, "time_s")};
      const std::string st = receipt_gate_status(g);
      if (st == "FAIL") {
        c.result = JunitCase::Result::failure;
        c.message = std::to_string(count(g, "failed")) + " of " + std::to_string(count(g, "passed") + count(g, "failed")) +
                    " checks failed";
        c.text = lines(g.value("failures", json::array()));
      } else if (st == "skipped") {
        c.result = JunitCase::Result::skipped;
        c.message = "skipped: " + str(g, "skip_reason");
      } else if (st == "not run") {
        c.result = JunitCase::Result::skipped;
        c.message = "not run: no selected case reached this gate";
      }
      s.cases.push_back(c);
    }
  if (r.contains("controls") && r["controls"].is_array())
    for (const auto& k : r["controls"]) {
      JunitCase c{"control " + str(k, "name"), cls + ".controls", num(k, "time_s")};
      if (!k.value("red", false)) {
        c.result = JunitCase::Result::failure;
        c.message = "control stayed green: no gate caught the planted defect";
        c.text = str(k, "description") + "\n" + lines(k.value("errors", json::array()));
      }
      s.cases.push_back(c);
    }
  if (r.contains("targets") && r["targets"].is_array())
    for (const auto& t : r["targets"]) {
      JunitCase c{"target " + str(t, "name"), cls + ".targets", 0};
      std::ostringstream v;
      v << format_target(num(t, "value"), num(t, "limit")) << (t.value("at_least", false) ? " >= " : " <= ")
        << std::setprecision(4) << num(t, "limit");
      if (!t.value("measured", false)) {
        c.result = JunitCase::Result::skipped;
        c.message = "not measured";
      } else if (!t.value("met", false)) {
        c.result = JunitCase::Result::failure;
        c.message = "not met: wanted " + v.str();
      }
      s.cases.push_back(c);
    }
  if (r.contains("errors") && r["errors"].is_array() && !r["errors"].empty()) {
    JunitCase c{"errors", cls, 0};
    c.result = JunitCase::Result::error;
    c.message = std::to_string(r["errors"].size()) + " backend or setup errors";
    c.text = lines(r["errors"]);
    s.cases.push_back(c);
  }
  JunitCase v{"verdict", cls, s.time_s};
  if (str(r, "verdict") != "pass") {
    v.result = JunitCase::Result::failure;
    v.message = "verdict fail";
    v.text = lines(r.value("verdict_reasons", json::array()));
  }
  s.cases.push_back(v);
  s.system_out = lines(r.value("replay", json::array()));
  return s;
}

std::string junit_xml(const std::string& name, const std::vector<JunitSuite>& suites) {
  auto totals = [](const std::vector<JunitCase>& cs, JunitCase::Result res) {
    int64_t n = 0;
    for (const auto& c : cs) n += c.result == res;
    return n;
  };
  int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
  double time = 0;
  for (const auto& s : suites) {
    tests += int64_t(s.cases.size());
    failures += totals(s.cases, JunitCase::Result::failure);
    errors += totals(s.cases, JunitCase::Result::error);
    skipped += totals(s.cases, JunitCase::Result::skipped);
    time += s.time_s;
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"" << xml_escape(name) << "\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\"" << seconds(time) << "\">\n";
  for (size_t i = 0; i < suites.size(); ++i) {
    const JunitSuite& s = suites[i];
    o << "  <testsuite name=\"" << xml_escape(s.name) << "\" tests=\"" << s.cases.size() << "\" failures=\""
      << totals(s.cases, JunitCase::Result::failure) << "\" errors=\"" << totals(s.cases, JunitCase::Result::error)
      << "\" skipped=\"" << totals(s.cases, JunitCase::Result::skipped) << "\" time=\"" << seconds(s.time_s) << "\" id=\""
      << i << "\"";
    if (!s.timestamp.empty()) o << " timestamp=\"" << xml_escape(s.timestamp) << "\"";
    if (!s.hostname.empty()) o << " hostname=\"" << xml_escape(s.hostname) << "\"";
    o << ">\n";
    if (!s.properties.empty()) {
      o << "    <properties>\n";
      for (const auto& [k, v] : s.properties)
        o << "      <property name=\"" << xml_escape(k) << "\" value=\"" << xml_escape(v) << "\"/>\n";
      o << "    </properties>\n";
    }
    for (const auto& c : s.cases) {
      o << "    <testcase name=\"" << xml_escape(c.name) << "\" classname=\"" << xml_escape(c.classname) << "\" time=\""
        << seconds(c.time_s) << "\"";
      switch (c.result) {
        case JunitCase::Result::passed: o << "/>\n"; continue;
        case JunitCase::Result::skipped: o << ">\n      <skipped message=\"" << xml_escape(c.message) << "\"/>\n"; break;
        case JunitCase::Result::failure:
          o << ">\n      <failure message=\"" << xml_escape(c.message) << "\" type=\"failure\">" << xml_escape(c.text, false)
            << "</failure>\n";
          break;
        case JunitCase::Result::error:
          o << ">\n      <error message=\"" << xml_escape(c.message) << "\" type=\"error\">" << xml_escape(c.text, false)
            << "</error>\n";
          break;
      }
      o << "    </testcase>\n";
    }
    if (!s.system_out.empty()) o << "    <system-out>" << xml_escape(s.system_out, false) << "</system-out>\n";
    o << "  </testsuite>\n";
  }
  o << "</testsuites>\n";
  return o.str();
}

bool junit_writable(const std::string& path, std::string* why) {
  std::string target;
  const Status st = prepare_output(path, &target);
  if (!st.ok) *why = "--junit " + st.message;
  return st.ok;
}

std::string junit_text(const std::string& name, const std::vector<json>& receipts) {
  std::vector<JunitSuite> suites;
  for (const auto& r : receipts) suites.push_back(junit_suite(r));
  return junit_xml(name, suites);
}

Status write_junit(const std::string& path, const std::string& name, const std::vector<json>& receipts) {
  return write_text_atomic(path, junit_text(name, receipts));
}

}  // namespace kc
