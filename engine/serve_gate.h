// `tf-cuda-test serve-gate FIXTURE [--backend cpu|cuda|auto] [--kv-cache F[,F]] [--out FILE]`: replays a serve
// fixture (fixtures/schema/serve-fixture.schema.json) through engine/serve.h and writes a
// receipt of kind "serve-gate". Exit 0 pass, 1 fail (a gate, a control left green, an
// engine error), 2 bad input (a fixture field named on stderr; nothing written).
#pragma once
#include <cstdint>
#include <map>
#include <ostream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model.h"

namespace kc::engine {

struct ServeFixture {
  std::string name;
  std::string model_dir;  // resolved against the fixture's folder
  std::vector<std::string> prompts;
  int new_tokens = 0;
  std::vector<int> parallel;  // lanes of the concurrent arms: one value, or one set of arms per value
  std::vector<int> pages;
  bool pages_all = true;
  int pool_pages = 0;
  int context = 0;
  int prefill_chunk = 16;
  std::vector<std::string> formats;
  int draft_layers = 0;          // the draft is the target's first layers (0: draft_model instead)
  std::string draft_model_dir;   // or a checkpoint of its own (resolved against the fixture's folder)
  int draft_tokens = 0;          // the chain arm's draft length
  std::vector<int> draft_tree;   // the tree arm's branching per depth (default {2, 1 x (tokens - 1)})
  // null, or per format either [hex per prompt] (every backend) or {backend: [hex per prompt]}
  // (cpu and cuda may differ: the cuda engine's SwiGLU uses CUDA's expf).
  nlohmann::json golden;
};

// Validates field by field; the error names the field ("prompts[2]: must be a non-empty string").
bool parse_serve_fixture(const nlohmann::json& j, const std::string& fixture_dir, ServeFixture* out, std::string* err);
// FNV-1a 64 of the token ids (int32 little-endian), 16 hex digits: the golden hash.
std::string token_hash(const std::vector<int32_t>& tokens);
std::string sha256_hex(const std::string& bytes);

struct ServeResult;
// The gates' comparison of two results of one prompt (every gate that pairs arms: concurrent ==
// solo, paged == contiguous, drafted == plain, resumed == fresh): empty when b equals a, token
// by token and (digests) the logits bytes behind each token, the same end, and where both
// stopped at <|eos|> the bytes of the row that chose it; else where and how they first differ
// (*at: the token index, -1 when equal).
std::string compare_serve_results(const ServeResult& a, const ServeResult& b, bool digests, int64_t* at);

// The golden hashes of `format` on `backend` (null when the fixture gives none).
nlohmann::json golden_for(const ServeFixture& f, const std::string& format, const std::string& backend);

// Reads and checks a fixture file (parse_serve_fixture, relative paths against its folder):
// false with *why ("FILE: reason") when it cannot be read, is not JSON or has a bad field.
// serve-gate, and kernel-contract before it runs anything, read their fixture through it.
bool read_serve_fixture(const std::string& path, ServeFixture* out, std::string* text, std::string* why);

// The engine side of a fixture that parse_serve_fixture cannot see: its checkpoints. The target
// and draft models, one per cache format the run serves (`fx.formats`) and the controls take
// (control_format: bf16 when run, else the first; restore_format: one with scale planes).
struct ServeModels {
  std::string draft_source;  // for the receipt: "the target's first K layers" or "checkpoint DIR (K layers)"
  std::string control_format, restore_format;
  std::map<std::string, Model> targets, drafts;  // by format name
};
// Loads and checks them: the model a byte-level checkpoint, draft.layers below its layer count or
// draft.model a checkpoint of its vocabulary, every format one the engine takes for both, the
// largest arena an arm takes at most half of this machine's memory. false with *why ("FIXTURE:
// field F: reason"). serve-gate, and kernel-contract before it runs any contract, call it.
bool load_serve_models(const std::string& fixture, const ServeFixture& fx, ServeModels* out, std::string* why);

struct ServeGateCommand {
  std::string fixture;
  std::string backend = "cpu";
  std::string kv_cache;  // non-empty: the cache formats to run (comma-separated), instead of the fixture's
  std::string out_file;
  std::vector<std::string> argv;
  nlohmann::json* receipt = nullptr;  // when set, receives the receipt once it is written (the command line's --junit)
  std::string junit_file;             // --junit: refused, as out_file, where it names a file of the fixture's models
  // With junit_file: the JUnit XML of the receipt, written with --out in one write (a failed
  // write leaves neither file).
  std::function<std::string(const nlohmann::json&)> junit_text;
  bool quiet = false;                 // no progress lines on err (kernel-contract --quiet)
};
int serve_gate_command(const ServeGateCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kc::engine
