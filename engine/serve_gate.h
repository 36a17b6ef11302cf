// `tf-cuda-test serve-gate FIXTURE [--backend cpu|cuda] [--out FILE]`: replays a serve
// fixture (fixtures/schema/serve-fixture.schema.json) through engine/serve.h and writes a
// receipt of kind "serve-gate". Exit 0 pass, 1 fail (a gate, a control left green, an
// engine error), 2 bad input (a fixture field named on stderr; nothing written).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc::engine {

struct ServeFixture {
  std::string name;
  std::string model_dir;  // resolved against the fixture's folder
  std::vector<std::string> prompts;
  int new_tokens = 0;
  int parallel = 0;
  std::vector<int> pages;
  bool pages_all = true;
  int pool_pages = 0;
  int context = 0;
  int prefill_chunk = 16;
  std::vector<std::string> formats;
  int draft_layers = 0;
  int draft_tokens = 0;
  nlohmann::json golden;  // null or {format: [hex per prompt]}
};

// Validates field by field; the error names the field ("prompts[2]: must be a non-empty string").
bool parse_serve_fixture(const nlohmann::json& j, const std::string& fixture_dir, ServeFixture* out, std::string* err);
// FNV-1a 64 of the token ids (int32 little-endian), 16 hex digits: the golden hash.
std::string token_hash(const std::vector<int32_t>& tokens);
std::string sha256_hex(const std::string& bytes);

struct ServeGateCommand {
  std::string fixture;
  std::string backend = "cpu";
  std::string out_file;
  std::vector<std::string> argv;
  nlohmann::json* receipt = nullptr;  // when set, receives the receipt (the command line's --junit)
};
int serve_gate_command(const ServeGateCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kc::engine
