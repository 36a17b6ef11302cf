// `tf-cuda-test kv-gate FIXTURE --format fp8|q4|mxfp4 [--backend cpu|cuda|auto] [--out FILE]
// [--bf16-cache DIR]` (issue 18): the fidelity gate of a quantized KV cache against the bf16
// cache, teacher-forced on a frozen public text at named depths, with recall probes,
// memory and decode speed, controls and a receipt of kind "kv-gate".
//
// One arm is one pass over the token stream on one window lane: for each depth D (ascending)
// the positions up to D are prefilled, rows D .. D+rows-1 are scored (their logits kept:
// row p predicts token p+1), then `decode_steps` single-row forwards time decode at that
// depth; the next depth continues the same stream. The bf16 arm runs first (or is read
// from the bf16 cache, keyed by fixture bytes, checkpoint hash, engine commit and backend),
// the quantized arm after it. Per depth, in float64 from the fp32 logits:
//   KL(bf16 || quantized) per row = sum_v p_v (log p_v - log q_v), log-softmax in float64;
//   mean and worst; percentiles 99.9, 99, 95, 90, 50 (nearest rank: the ceil(p/100 n)-th
//   smallest); top-token agreement; every row whose top token differs, with both arms'
//   margins (top-1 minus top-2 log-prob); perplexity of both arms on the scored targets.
// Bar (fixture, default): mean KL <= 0.01 and worst-token KL <= 0.1 at every depth.
// Exit 0 pass, 1 fail (a depth over the bar, a recall lost, a control left green, an engine
// error), 2 bad input (fixture field named; an unsupported format; nothing written).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model.h"

namespace kc::engine {

struct KvBar {
  double mean_kl = 0.01;
  double worst_token_kl = 0.1;
};

// One probe per passphrase: a fixture probe with a list of passphrases ("passphrases", the
// plant holding "{passphrase}") becomes one KvProbe for each, named GROUP#k.
struct KvProbe {
  std::string name;        // unique: the fixture probe's name, or GROUP#k for a list's k-th passphrase
  std::string group;       // the fixture probe's name
  int source = 0;          // its index in the fixture's recall array
  std::string passphrase;  // the answer: its bytes are scored teacher-forced at the end
  std::string plant;       // planted at half the depth; contains the passphrase
  std::string ask;         // right before the answer at the end
  std::vector<int> depths; // probe lengths (the answer's last byte sits at depth - 1)
};

struct KvFixture {
  std::string name;
  std::string model_dir;     // resolved against the fixture's folder
  std::string tokens_file;   // resolved
  std::string tokens_sha256;
  std::string tokens_source, tokens_licence;
  std::vector<int32_t> tokens;  // <|eos|> then the file's bytes
  std::vector<int> depths;
  int rows = 256;
  int decode_steps = 16;
  int prefill_chunk = 256;
  KvBar bar;
  std::vector<KvProbe> recall;
  std::vector<int> control_depths;  // default: the first depth
};

// Validates field by field ("depths[2]: must be larger than depths[1] + rows + decode_steps
// (...)"); reads the token file and checks its sha256. `dir`: the fixture's folder.
bool parse_kv_fixture(const nlohmann::json& j, const std::string& dir, KvFixture* out, std::string* err);

// ---- the arithmetic (float64), public for the tests ----
// log-softmax of one fp32 logits row, in float64.
void log_softmax64(const float* logits, int vocab, std::vector<double>* out);
// KL(P || Q) = sum_v exp(lp_v) (lp_v - lq_v) for log-prob rows lp (reference), lq.
double kl64(const double* lp, const double* lq, int vocab);
// Nearest rank: the ceil(p/100 * n)-th smallest of `v` (1-based; p in (0, 100]); NaN if empty.
double percentile_nearest_rank(std::vector<double> v, double p);
// Top-1 token and margin (top-1 minus top-2 log-prob) of a log-prob row.
void top2(const double* lp, int vocab, int32_t* top, double* margin);

struct KvTopDiff {
  int32_t pos = 0;
  int32_t target = 0;
  int32_t ref_top = 0, q_top = 0;
  double ref_margin = 0, q_margin = 0;
};

struct KvDepthStats {
  int depth = 0;
  int rows = 0;
  std::vector<double> kl;  // per scored row
  double mean_kl = 0, worst_kl = 0;
  int32_t worst_pos = 0;
  double p999 = 0, p99 = 0, p95 = 0, p90 = 0, p50 = 0;
  int agree = 0;
  std::vector<KvTopDiff> diffs;
  double ppl_ref = 0, ppl_q = 0;
};

// Stats of one depth from both arms' logits ([rows][vocab] fp32) of the rows at positions
// depth .. depth+rows-1 of `tokens` (row p's target: tokens[p+1]).
KvDepthStats kv_depth_stats(int depth, int rows, int vocab, const float* ref_logits, const float* q_logits,
                            const std::vector<int32_t>& tokens);
// Recomputes mean, worst and percentiles from `s.kl` (the bar control edits kl and calls it).
void kv_refresh_summary(KvDepthStats* s);

// Bar verdict of one depth: empty when it holds, else why ("mean KL 0.02 > 0.01; ...").
std::string kv_bar_failure(const KvDepthStats& s, const KvBar& bar);

// What a planted control's bar check judges at one depth, given the same format unplanted
// there: where the unplanted arm meets the bar, the planted stats themselves; where it
// already fails the bar, the plant's excess (per row, planted KL minus unplanted KL), so a
// plant that changed nothing (or less than the bar) does not fail the bar and its control
// stays green. *unplanted_meets and *excess (either may be null) report which and the excess.
KvDepthStats kv_control_judged(const KvDepthStats& planted, const KvDepthStats& unplanted, const KvBar& bar,
                               bool* unplanted_meets, KvDepthStats* excess);

// The logits of a probe's answer rows ([passphrase bytes][vocab]): run on a lane of its own
// (forked = false) or, as the gate runs it, on a second lane forked at depth/2 from a lane
// that holds the stream's first depth/2 tokens (Backend::pack / unpack). The tests check
// that both are the same bytes.
Status kv_probe_logits(const Model& m, Backend& be, const KvProbe& p, int depth, const std::vector<int32_t>& stream,
                       int chunk, bool forked, std::vector<float>* logits);

// The sequence length the model trained at: `training.seq` of the model folder's
// fixture.json (what tools/train_fixture_model.py writes), else config.json's
// max_position_embeddings when the folder has no fixture.json. A fixture.json without a
// positive integer training.seq is an error ("FILE: field training.seq: ...").
bool kv_training_context(const std::string& model_dir, int64_t max_position_embeddings, int64_t* positions,
                         std::string* source, std::string* err);

// The receipt's recall entries counted per (probe group, depth), in the order first seen:
// probes, bf16_recalled, quant_recalled, informative (= bf16_recalled), kept (both arms),
// lost (bf16 only), gained (quantized only), beyond_training.
nlohmann::json kv_recall_summary(const nlohmann::json& recall);

// The checkpoint's hash: sha256 over the sorted names and sha256 of its config.json,
// *.index.json and *.safetensors files, and of every shard an index's weight_map names (the
// files the loader reads, whatever their names), one line "name sha256" each; also in
// generate's and bench engine's receipts.
std::string checkpoint_sha256(const std::string& dir);

// The receipt's entry of one depth (kv.depths[i]): the stats, their bar verdict, and
// beyond_training: whether any scored row (positions depth .. depth + rows - 1) lies at or
// past `train_ctx` positions (depth + rows > train_ctx).
nlohmann::json kv_depth_json(const KvDepthStats& s, const KvBar& bar, int64_t train_ctx, double ref_tok_s,
                             double q_tok_s);

// The key of the stored bf16 arm (--bf16-cache): sha256 over the fixture's bytes, the token
// file's, the checkpoint's hash, the engine commit and the backend's name, so that one cache
// folder never serves an arm computed by another engine, checkpoint or backend.
std::string kv_bf16_arm_key(const std::string& fixture_sha, const std::string& tokens_sha, const std::string& ckpt_sha,
                            const std::string& engine_commit, const Backend* be);

struct KvGateCommand {
  std::string fixture;
  std::string format;            // fp8, q4, mxfp4 (may be empty with bf16_only)
  std::string backend = "cpu";   // cpu, cuda, auto
  std::string out_file;
  std::string bf16_cache = "kv-gate-cache";  // folder of the bf16 arm's stored log-probs
  bool bf16_only = false;  // compute (or find) and store the bf16 arm, then stop: no receipt, exit 0
  bool quiet = false;      // no progress lines on err (--quiet); errors and warnings still go there
  std::vector<std::string> argv;
};
int kv_gate_command(const KvGateCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kc::engine
