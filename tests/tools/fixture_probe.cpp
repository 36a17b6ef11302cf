// The fixture validators (parse_serve_fixture, parse_kv_fixture) as a filter, for
// tests/tools/fixture_fuzz.py: one JSON object per input line,
//   {"kind": "serve" | "kv", "dir": FIXTURE_FOLDER, "fixture": {...}}
// and one per output line, in order:
//   {"ok": true} | {"ok": false, "err": "field F: reason"} | {"exception": "what"}
// An exception is a validator defect (a bad fixture must be refused by name, never thrown at);
// the fuzz counts it as one. Exit 2 on a line that is not such an object (the driver's defect).
#include <exception>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/kv_gate.h"
#include "engine/serve_gate.h"

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  long n = 0;
  while (std::getline(std::cin, line)) {
    ++n;
    nlohmann::json in;
    try {
      in = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      std::cerr << "fixture_probe: line " << n << ": not JSON: " << e.what() << "\n";
      return 2;
    }
    if (!in.is_object() || !in.contains("kind") || !in.contains("dir") || !in.contains("fixture") ||
        !in["kind"].is_string() || !in["dir"].is_string() || (in["kind"] != "serve" && in["kind"] != "kv")) {
      std::cerr << "fixture_probe: line " << n << ": expected {\"kind\": \"serve\"|\"kv\", \"dir\", \"fixture\"}\n";
      return 2;
    }
    nlohmann::json out;
    try {
      std::string err;
      bool ok;
      if (in["kind"] == "serve") {
        kc::engine::ServeFixture f;
        ok = kc::engine::parse_serve_fixture(in["fixture"], in["dir"].get<std::string>(), &f, &err);
      } else {
        kc::engine::KvFixture f;
        ok = kc::engine::parse_kv_fixture(in["fixture"], in["dir"].get<std::string>(), &f, &err);
      }
      out["ok"] = ok;
      if (!ok) out["err"] = err;
    } catch (const std::exception& e) {
      out = {{"exception", e.what()}};
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::cout.flush();
  return 0;
}
