// The input validators (parse_serve_fixture, parse_kv_fixture, Receipt::check) as a filter,
// for tests/tools/fixture_fuzz.py: one JSON object per input line,
//   {"kind": "serve" | "kv" | "receipt", "dir": FIXTURE_FOLDER (or the receipt's file), "fixture": {...}}
//   {"kind": "schema", "dir": SCHEMA_FILE, "fixture": DOCUMENT}  (contracts/json_schema.h alone)
//   {"kind": "checkpoint", "dir": MODEL_FOLDER, "fixture": null}  (check_qwen3_checkpoint, then
//     load_qwen3_checkpoint: tests/tools/checkpoint_fuzz.py)
// and one per output line, in order:
//   {"ok": true} | {"ok": false, "err": "field F: reason"} | {"exception": "what"}
// An exception is a validator defect (a bad fixture must be refused by name, never thrown at);
// the fuzz counts it as one. Exit 2 on a line that is not such an object (the driver's defect).
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "contracts/json_schema.h"
#include "contracts/receipt.h"
#include "engine/checkpoint.h"
#include "engine/kv_gate.h"
#include "engine/serve_gate.h"

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  long n = 0;
  std::map<std::string, kc::JsonSchema> schemas;
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
        !in["kind"].is_string() || !in["dir"].is_string() || (in["kind"] != "serve" && in["kind"] != "kv" && in["kind"] != "receipt" && in["kind"] != "schema" && in["kind"] != "checkpoint")) {
      std::cerr << "fixture_probe: line " << n << ": expected {\"kind\": \"serve\"|\"kv\"|\"receipt\"|\"schema\"|\"checkpoint\", \"dir\", \"fixture\"}\n";
      return 2;
    }
    nlohmann::json out;
    try {
      std::string err;
      bool ok;
      if (in["kind"] == "serve") {
        kc::engine::ServeFixture f;
        ok = kc::engine::parse_serve_fixture(in["fixture"], in["dir"].get<std::string>(), &f, &err);
      } else if (in["kind"] == "schema") {
        const std::string path = in["dir"].get<std::string>();
        if (!schemas.count(path)) {
          kc::JsonSchema s;
          std::string why;
          if (!kc::JsonSchema::compile(nlohmann::json::parse(std::ifstream(path)), &s, &why)) {
            std::cerr << "fixture_probe: " << path << ": " << why << "\n";
            return 2;
          }
          schemas[path] = s;
        }
        err = schemas[path].validate(in["fixture"]);
        ok = err.empty();
      } else if (in["kind"] == "checkpoint") {
        const std::string dir = in["dir"].get<std::string>();
        kc::Status st = kc::engine::check_qwen3_checkpoint(dir);
        if (st.ok) {
          kc::engine::Qwen3Weights w;
          st = kc::engine::load_qwen3_checkpoint(dir, &w);
        }
        ok = st.ok;
        err = st.message;
      } else if (in["kind"] == "receipt") {
        const kc::Status st = kc::Receipt::check(in["fixture"], in["dir"].get<std::string>());
        ok = st.ok;
        err = st.message;
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
