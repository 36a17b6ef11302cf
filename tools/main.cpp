// tf-cuda-test: the command line of kernel-contracts.
//   tf-cuda-test list
//   tf-cuda-test <contract> [--backend auto|cpu|cuda] [--seed N] [--cases N] [--filter REGEX | --case LINE] [--out FILE]
//                           [--quiet] [--gates-only] [--shard i/n] [--junit FILE]
//   tf-cuda-test kernel-contract [--backend ...] [--seed N] [--out-dir DIR] [--serve-fixture FILE] [--shard i/n] [--junit FILE]
//   tf-cuda-test bench {attention|pack|engine|rope-store|compact} [--quick] [--reps N] [--out FILE]   (cuda only)
//   tf-cuda-test report RECEIPT... [--format md|text|html] [--merge-out DIR]
//   tf-cuda-test diff BASE HEAD
//   tf-cuda-test premerge --base DIR [--head DIR] [--backend ...] [--out-dir DIR] [--max-slowdown X] [--max-slowdown-short X] [--short-row-us T] [--junit FILE] [--base-bin PATH] [--skip-gates]
//   tf-cuda-test generate --model DIR --prompt TEXT|--prompt-file F --max-tokens N [--kv-cache F] [--pages P]
//   tf-cuda-test serve-gate FIXTURE [--backend cpu|cuda|auto] [--kv-cache F[,F]] [--out FILE]
//   tf-cuda-test serve-memory --preset P [--parallel L] [--context C] [--page P] [--prompts N,...] [--out FILE]
//   tf-cuda-test make-draft --from DIR --layers N --out DIR
//   tf-cuda-test kv-gate FIXTURE --format fp8|q4|mxfp4 [--backend cpu|cuda|auto] [--out FILE] [--bf16-cache DIR] [--bf16-only]
//   tf-cuda-test export qwen-pages --out DIR [--backend ...] [--cases N] [--seed N]
// Exit codes: 0 every gate held and every control was red; 1 a gate failed, a control
// was green or a backend error occurred; 2 bad usage or bad input.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "contracts/contracts.h"
#include "contracts/framework.h"
#include "engine/generate.h"
#include "engine/kv_gate.h"
#include "engine/serve_gate.h"
#include "tools/export.h"
#include "engine/make_draft.h"
#include "engine/make_model.h"
#include "engine/serve_memory.h"
#include "tools/bench_attention.h"
#include "tools/bench_engine.h"
#include "tools/bench_moves.h"
#include "tools/bench_pack.h"
#include "tools/junit.h"
#include "tools/premerge.h"
#include "tools/receipt_merge.h"
#include "tools/receipt_views.h"

namespace {

constexpr int kUsage = 2;
// --filter within kc::kMaxFilterBytes, else the error on stderr (exit 2 follows).
bool filter_fits(const std::string& filter, const std::string& cmd) {
  if (filter.size() <= kc::kMaxFilterBytes) return true;
  std::cerr << "tf-cuda-test: error: " << cmd << "--filter: " << filter.size() << " bytes; at most " << kc::kMaxFilterBytes
            << " (std::regex compiles a pattern by recursion)\n";
  return false;
}

struct Common {
  std::string backend = "auto";
  std::string seed;                   // as typed; parse_seed turns it into seed_value
  std::optional<uint64_t> seed_value;  // set when --seed was given (0 .. 2^64 - 1)
  int cases = 0;
  std::string filter;
  std::string case_line;
  std::string out;
  std::string out_dir = "receipts";
  std::string serve_fixture;  // kernel-contract: the serve fixture replayed after the contracts
  bool quiet = false;
  std::string junit;   // --junit FILE
  std::string shard;   // --shard i/n, as typed
  int shard_i = 1, shard_n = 1;
  bool gates_only = false;
};

#ifndef KC_SOURCE_DIR
#define KC_SOURCE_DIR ""
#endif
// kernel-contract's serve fixture: --serve-fixture, else fixtures/serve/ci.json from the
// working directory, else from the source tree this binary was built from.
std::string find_serve_fixture(const std::string& given) {
  if (!given.empty()) return given;
  const std::string rel = "fixtures/serve/ci.json";
  if (std::filesystem::is_regular_file(rel)) return rel;
  const std::string src = std::string(KC_SOURCE_DIR);
  if (!src.empty() && std::filesystem::is_regular_file(src + "/" + rel)) return src + "/" + rel;
  return "";
}

// The commands besides the contracts (each contract is a command of its own name).
constexpr const char* kBuiltinCommands[] = {"list", "kernel-contract", "bench", "report", "diff", "make-model", "generate", "serve-gate", "kv-gate", "export", "make-draft", "serve-memory", "premerge"};

std::string known_commands() {
  std::string s;
  for (const char* b : kBuiltinCommands) s += (s.empty() ? "" : ", ") + std::string(b);
  for (const auto& c : kc::contracts()) s += ", " + c.name;
  return s;
}

// --seed: decimal digits only, 0 .. 2^64 - 1 (CLI11 would wrap -1 and clamp 2^64).
bool parse_seed(const std::string& text, uint64_t* seed, std::string* why) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, *seed);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || ec != std::errc() || end != last) {
    *why = "--seed '" + text + "': expected a whole number from 0 to 18446744073709551615";
    return false;
  }
  return true;
}

// Fails early (before a long run) when the receipt cannot be written there.
bool output_writable(const std::string& path, std::string* why) {
  std::string target;
  const kc::Status st = kc::prepare_output(path, &target);
  if (!st.ok) *why = st.message;
  return st.ok;
}

int run_one(const kc::ContractDef& c, kc::Backend& be, const Common& o, CLI::App& sub,
            const std::vector<std::string>& argv, const std::string& out, nlohmann::json* receipt = nullptr,
            const std::string& label = "", const std::string& junit = "") {
  kc::RunOptions ro;
  ro.backend = o.backend;
  // kernel-contract has --seed but no --cases: ask only for options the command has.
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->get_name() == "--cases" && opt->count()) ro.cases = o.cases;
    if (opt->get_name() == "--case" && opt->count()) ro.case_line = o.case_line;
  }
  ro.seed = o.seed_value;
  ro.filter = o.filter;
  ro.argv = argv;
  ro.quiet = o.quiet;
  ro.shard = o.shard_i;
  ro.shards = o.shard_n;
  ro.label = label;
  ro.gates_only = o.gates_only;
  const kc::RunResult r = kc::run_contract(c, be, ro);
  if (receipt) *receipt = r.receipt.doc();
  std::cout << kc::summary_table(r.receipt) << std::flush;
  // The receipt and --junit in one write: a JUnit that cannot be written (a full disk) leaves
  // no new receipt either, and the reverse (exit 2 writes nothing).
  std::vector<std::pair<std::string, std::string>> files;
  if (!out.empty()) files.push_back({out, kc::json_file_text(r.receipt.doc())});
  if (!junit.empty()) files.push_back({junit, kc::junit_text("tf-cuda-test " + c.name, {r.receipt.doc()})});
  if (!files.empty()) {
    const kc::Status st = kc::write_files_atomic(files);
    if (!st.ok) {
      std::cerr << "tf-cuda-test: error: " << (out.empty() ? "--junit " : "") << st.message << "\n";
      if (!junit.empty() && !out.empty())
        std::cerr << "tf-cuda-test: note: --junit " << junit << " not written either (the run exits 2)\n";
      return kUsage;
    }
    if (!out.empty()) std::cout << "receipt: " << out << "\n";
  }
  return r.pass ? 0 : 1;
}

}  // namespace

int run_main(int argc, char** argv);

// A size the input asks for that the host cannot allocate (a huge pool, cache or context) ends
// in a message and exit 1, not an abort; every output is written atomically, so nothing is
// left half-written.
int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "tf-cuda-test: error: out of host memory (std::bad_alloc): the run asked for more than this machine "
                 "can allocate (a pool, cache or context size)\n";
    return 1;
  }
}

int run_main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  CLI::App app{
      "tf-cuda-test: kernel contracts for paged attention kernels.\n"
      "Each contract pairs CUDA kernels (backend cuda) or their host twins (backend cpu)\n"
      "with float64 references, checks its gates on generated cases and proves it can\n"
      "fail with planted controls that must be red.\n"
      "Exit codes: 0 pass, 1 a gate failed or a control was green, 2 bad usage or input."};
  app.require_subcommand(1, 1);
  app.fallthrough(false);
  // A parse error reads as every other refusal: the program, "error:", the command (each is
  // one of the app's own subcommands; `bench attention`'s `attention` is an argument), then
  // CLI11's reason and where the help is.
  app.failure_message([](const CLI::App* top, const CLI::Error& e) {
    const std::vector<CLI::App*> subs = top->get_subcommands();
    const std::string cmd = subs.empty() ? "" : subs.front()->get_name();
    return "tf-cuda-test: error: " + (cmd.empty() ? "" : cmd + ": ") + e.what() + "\nRun 'tf-cuda-test " +
           (cmd.empty() ? "" : cmd + " ") + "--help' for more information.\n";
  });

  auto* list = app.add_subcommand("list", "List the contracts and what each proves");

  Common o;
  // Counts: whole numbers from 1 (CLI::PositiveNumber's message for 0 read "not in range
  // 0.000000 to 1.8e308").
  const CLI::Range kAtLeastOne(1, std::numeric_limits<int>::max());
  std::vector<CLI::Option*> seed_options;
  auto add_run_options = [&](CLI::App* s) {
    s->add_option("--backend", o.backend, "auto (cuda when a device is present), cpu (host twins) or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    seed_options.push_back(s->add_option("--seed", o.seed,
                  "Seed of the case generator, 0 to 18446744073709551615 (printed and recorded; replays a run)")
        ->type_name("UINT64"));
    s->add_flag("--quiet", o.quiet, "No progress lines on stderr");
  };
  // --junit and --shard (issue 21): a JUnit file for CI reporters, a deterministic share of the cases.
  auto add_ci_options = [&](CLI::App* s) {
    s->add_option("--junit", o.junit,
                  "Also write a JUnit XML file here (one testcase per gate, control and target; a green control is a "
                  "failure), atomically");
    s->add_option("--shard", o.shard,
                  "Run shard i of n: every n-th selected case from the i-th (the cases are dealt in turn; refusal "
                  "probes and fixed cases are cases too); controls and checks outside the cases run in every shard; a "
                  "shard that holds no case fails, so use at most as many shards as cases (kernel-contract refuses more "
                  "than its smallest contract's count); report merges the shards' receipts")
        ->type_name("i/n");
  };
  std::vector<std::pair<const kc::ContractDef*, CLI::App*>> subs;
  for (const kc::ContractDef& c : kc::contracts()) {
    auto* s = app.add_subcommand(c.name, c.summary);
    add_run_options(s);
    s->add_option("--cases", o.cases, "Number of generated cases (default " + std::to_string(c.default_cases) + ")")
        ->check(kAtLeastOne);
    auto* filter = s->add_option("--filter", o.filter,
                                 "Run only cases whose name(k=v,...) line matches this ECMAScript regex (searched, at most "
                                 "1000 bytes); a filter that matches no case fails the run");
    s->add_option("--case", o.case_line,
                  "Run only the case whose printed name(k=v,...) line is exactly LINE (literal, no regex): paste a "
                  "failing case's line, with the same --seed and --cases, to replay it (a failing run prints the "
                  "command); a line that matches no case fails the run")
        ->type_name("LINE")
        ->excludes(filter);
    s->add_flag("--gates-only", o.gates_only,
                "Check the gates only, run no control (for mutant tests: the contract's own run proves its controls); "
                "the verdict is then always fail (exit 1) and the receipt records controls_skipped");
    s->add_option("--out", o.out,
                  "Write the JSON receipt here, atomically (temp file, then rename). Missing folders are created; an "
                  "existing path that is not a regular file is refused (exit 2); a symlink is followed and the file it "
                  "points to is replaced");
    add_ci_options(s);
    subs.push_back({&c, s});
  }
  auto* all = app.add_subcommand("kernel-contract", "Run every contract; one receipt each in --out-dir");
  add_run_options(all);
  all->add_option("--out-dir", o.out_dir,
                  "Folder for the receipts, <contract>.json each (default ./receipts; created with its parents if "
                  "missing; each receipt is written as --out writes one)");
  all->add_option("--serve-fixture", o.serve_fixture,
                  "After the contracts, replay this serve fixture as serve-gate does (receipt serve-gate.json in "
                  "--out-dir); default fixtures/serve/ci.json, from the working directory or else from the source "
                  "tree the binary was built from");
  add_ci_options(all);

  std::string bench_what;
  kc::BenchOptions bo;
  std::string bench_out;
  auto* bench = app.add_subcommand("bench", "Benchmarks on the GPU (cuda only): attention, pack, engine, rope-store, compact");
  bench->add_option("what", bench_what,
                    "What to time: attention (split-K partial + merge), pack (scale-plane pack / unpack kernels), "
                    "engine (greedy decode of the trained fixture model and the synthetic qwen35-27b-attn preset at "
                    "--parallel 1, 4, 8, bf16 and fp8 caches, window and pages of 256 and 16, against transformers' "
                    "generate in the same run; attention's share of a step at 32K), rope-store (the rope store kernel) or "
                    "compact (the keep kernel); rope-store and compact against a copy of the same bytes, 1 MiB .. 1 GiB "
                    "moved, bf16 / fp8 / q4, pages of 16 and 256 and a window")
      ->required();
  bench->add_flag("--quick", bo.quick,
                  "attention: batches 1, 8 and contexts 4K, 32K only; pack: blobs of 16 and 64 MiB only; engine: 64 "
                  "tokens per lane, 3 runs; rope-store, compact: 4, 64 and 256 MiB only");
  auto* bench_reps =
      bench->add_option("--reps", bo.reps, "Timed runs per configuration (median reported; default 30, engine 7)")
          ->check(kAtLeastOne);
  auto* bench_transformers = bench->add_option("--transformers", bo.transformers,
                    "engine: the python that runs tools/transformers_decode_bench.py (default python3; 'none': "
                    "transformers not measured, its targets read 'not measured')");
  auto* bench_sdpa = bench->add_option("--sdpa", bo.sdpa,
                    "attention: the python that runs tools/bench_sdpa.py (default python3; 'none': SDPA not "
                    "measured, its targets and the ours / SDPA column read 'not measured', the receipt's sdpa says "
                    "why; for A/Bs of two builds, which need no baseline)");
  auto* bench_engine_model = bench->add_option("--engine-model", bo.engine_model,
                    "engine: the trained checkpoint's folder (default fixtures/models/stdlib-bytes-3m)");
  auto* bench_layers = bench->add_option("--layers", bo.engine_layers, "engine: layers of the synthetic qwen35-27b-attn preset (default 4)")
      ->check(CLI::Range(1, 64));
  auto* bench_tokens = bench->add_option("--tokens", bo.engine_tokens, "engine: tokens decoded per lane (default 128, --quick 64)")
      ->check(CLI::Range(2, 4000));
  bench->add_option("--profile", bo.engine_profile,
                    "engine only: instead of the bench, where a decode step's time goes (event time per kernel "
                    "kind, the step held on the device until enqueued; legacy kernels against the current ones, "
                    "and whether their logits bytes agree) for a few configurations; a JSON summary (not a "
                    "receipt) to this path, the table on stdout");
  bench->add_option("--out", bench_out,
                    "Write the bench receipt here, atomically; missing folders are created, an existing path that is "
                    "not a regular file is refused, a symlink is followed");
  auto* bench_script_dir = bench->add_option("--script-dir", bo.script_dir,
                                             "attention, engine: folder of bench_sdpa.py and "
                                             "transformers_decode_bench.py (default tools)");
  auto* bench_chunk = bench->add_option("--chunk", bo.chunk, "attention: key chunk width of the split-K partial (default 512)")
      ->check(CLI::Range(1, 1024));
  auto* bench_timing =
      bench->add_option("--timing", bo.timing,
                        "attention: how a run is timed: events (default: CUDA events around partial+merge on an "
                        "idle device, the host's enqueue inside), gated (enqueued behind a gate kernel: the device "
                        "alone), graph (a CUDA graph of the two launches), partial (gated, the partial alone)")
          ->check(CLI::IsMember({"events", "gated", "graph", "partial"}));
  auto* bench_filter = bench->add_option("--filter", bo.filter,
                    "attention: time only the rows whose config/format/addressing (as printed, e.g. "
                    "'24q/4kv/d256/b8/ctx32768/bf16/window') matches this ECMAScript regex (at most 1000 bytes); unmeasured targets read "
                    "'not measured'. rope-store, compact: the rows whose size/format/addressing (e.g. "
                    "'256MiB/q4/p16') matches; a filter that selects no row exits 2");
  auto* bench_l2 =
      bench->add_option("--l2", bo.l2,
                        "rope-store, compact: the L2 rule of every timed run, the kernel's and the copy ceiling's "
                        "alike (the receipt's l2_policy): flush (default: a buffer of twice the L2 read, untimed, "
                        "before each run, so no run finds its previous run's lines) or warm (runs back to back, "
                        "the rule of receipts without l2_policy)")
          ->check(CLI::IsMember({"flush", "warm"}));
  std::vector<std::string> report_files;
  std::string report_format = "md";
  auto* report = app.add_subcommand(
      "report",
      "Render receipts as the Markdown tables a reviewer pastes into a pull request (or aligned text): what ran "
      "where, gates with their worst cases, controls and what caught each, bench targets and rows. Exit 0 when "
      "every receipt's verdict is pass, 1 when one is fail, 2 when a file is not a readable receipt (nothing is "
      "printed then)");
  report->add_option("receipts", report_files, "Receipt files (JSON, as written by --out)")->required();
  report->add_option("--format", report_format,
                     "md (default), text, or html: one self-contained page (inline SVG plots of bench and kv-gate "
                     "receipts, no script, nothing fetched)")
      ->check(CLI::IsMember({"md", "text", "html"}));
  std::string report_merge_out;
  report->add_option("--merge-out", report_merge_out,
                     "Merge the shard receipts among the files (kernel-contract --shard i/n, every shard of a contract) "
                     "and write each merged receipt here as <contract>.json");
  std::string report_junit;
  report->add_option("--junit", report_junit, "Also write the receipts as a JUnit XML file (one testcase per gate, control "
                                              "and target; a green control is a failure)");
  std::string diff_base, diff_head;
  auto* diff = app.add_subcommand(
      "diff",
      "What changed from BASE to HEAD, two receipts of the same contract, bench, serve-gate, kv-gate or "
      "serve-memory run: verdict, gates (results, counts, worst ratios), controls, bench targets and rows and the "
      "largest timing changes, measured numbers. Regressions (a gate ok -> FAIL, not run, or removed, ok -> skipped "
      "on the same device, a failing gate failing more checks, a control red -> GREEN or removed, verdict pass -> "
      "fail, a target met -> not met or not measured, a verified bench row removed or no longer verified) are "
      "listed first and make the exit code 1; 2 for unreadable or incomparable receipts");
  diff->add_option("base", diff_base, "The earlier receipt")->required();
  diff->add_option("head", diff_head, "The later receipt")->required();
  std::string mm_preset, mm_out, mm_seed = "0";
  int mm_layers = 0;
  auto* make_model = app.add_subcommand(
      "make-model",
      "Write a synthetic Qwen3 checkpoint (config.json + model.safetensors, bf16, Hugging Face names), "
      "deterministic from --seed: preset tiny (vocab 260, hidden 128, 4 q / 2 kv heads x 32) or qwen35-27b-attn "
      "(24 q / 4 kv heads x 256, partial rotary 64, hidden 5120). Exit 2 for a bad preset or an --out that exists "
      "and is not an empty folder");
  make_model->add_option("--preset", mm_preset, "tiny or qwen35-27b-attn")->required();
  make_model->add_option("--layers", mm_layers, "Layers (default: the preset's, 2)")->check(CLI::Range(1, 64));
  make_model->add_option("--seed", mm_seed, "Seed of the weights, 0 to 18446744073709551615")->type_name("UINT64");
  make_model->add_option("--out", mm_out, "Folder to write (created; must not hold files)")->required();
  kc::engine::GenerateCommand gen;
  auto* generate = app.add_subcommand(
      "generate",
      "Greedy decoding of a byte-level Qwen3 checkpoint on the engine: prefill in chunks, then one token per step; "
      "prints the continuation (stops at <|eos|> or --max-tokens). Exit 2 for a missing or bad model, bad options");
  generate->add_option("--model", gen.model_dir, "Checkpoint folder (config.json + model.safetensors)")->required();
  auto* gen_prompt = generate->add_option("--prompt", gen.prompt, "Prompt text (bytes)");
  generate->add_option("--prompt-file", gen.prompt_file, "Read the prompt from this file")->excludes(gen_prompt);
  generate->add_option("--max-tokens", gen.max_tokens, "Tokens to generate")->required()->check(kAtLeastOne);
  generate->add_option("--kv-cache", gen.kv_cache, "KV cache format: bf16 (default), fp8, q4 or mxfp4")
      ->check(CLI::IsMember({"bf16", "fp8", "q4", "mxfp4"}));
  generate->add_option("--pages", gen.pages, "Page size in positions (default 0: one contiguous window)")
      ->check(CLI::Range(0, 1 << 20));
  generate->add_option("--backend", gen.backend, "cpu (host twins, default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  generate->add_option("--out", gen.out_file,
                       "Write the receipt (kind generate: tokens, time to first token, decode tok/s, cache bytes, the "
                       "checkpoint's sha256) here, atomically");
  // serve-gate (issue 17): replays a serve fixture's gates and controls, writes a receipt.
  kc::engine::ServeGateCommand sg;
  auto* serve_gate = app.add_subcommand(
      "serve-gate",
      "Replay a serve fixture (fixtures/serve/*.json): every prompt alone, all at once forward and reverse with "
      "queued requests, pages vs windows, chain- and tree-drafted, resumed from a packed prompt state, per cache "
      "format; gates concurrent == solo, paged == contiguous, drafted == plain, tree-drafted == plain, resumed == "
      "fresh, golden; engine controls must be red. Exit 2 for a bad fixture (the field is named) with nothing "
      "written");
  serve_gate->add_option("fixture", sg.fixture, "Fixture JSON file")->required();
  serve_gate->add_option("--backend", sg.backend, "cpu (default), cuda or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  serve_gate->add_option("--kv-cache", sg.kv_cache,
                         "Cache formats to run instead of the fixture's cache_formats: bf16, fp8, q4 or mxfp4, or a "
                         "comma-separated list (the fixture's goldens for those formats apply)");
  serve_gate->add_option("--out", sg.out_file, "Write the receipt (kind serve-gate) here, atomically");
  serve_gate->add_flag("--quiet", sg.quiet, "No progress lines on stderr (errors and warnings still go there)");
  // serve-memory (issue 17): the serving arena planned and admitted in three arms, a receipt.
  kc::engine::ServeMemoryCommand sm;
  auto* serve_memory = app.add_subcommand(
      "serve-memory",
      "The memory receipt of serving (kind serve-memory): for a make-model preset's shape (no weights), windows for "
      "every lane vs the pool (pages-all) vs the pool with runs (lane 0's window and every lane's drafter cache), "
      "planned as serve plans and admitted into a real pool: bytes fixed per lane, pages taken, bytes in use, arena "
      "bytes. Gates admitted and run planning; controls run-one-part-short, pool-one-page-short. No forward runs. "
      "Exit 2 for bad options with nothing written");
  serve_memory->add_option("--preset", sm.preset, "tiny or qwen35-27b-attn")->required();
  serve_memory->add_option("--layers", sm.layers,
                           "Layers (default: the preset's, 2; at least 2: the drafter takes fewer)")
      ->check(CLI::Range(2, 64));
  serve_memory->add_option("--parallel", sm.parallel, "Lanes (default 4)");
  serve_memory->add_option("--context", sm.context, "Positions a lane holds at most, 2..2^20 (default 32768)");
  serve_memory->add_option("--page", sm.page, "Page size in positions (default 256)");
  serve_memory->add_option("--kv-cache", sm.kv_cache, "bf16 (default), fp8, q4 or mxfp4");
  serve_memory->add_option("--prompts", sm.prompts,
                           "Prompt lengths in tokens, one request per lane (default 1201,2804,4413,6003: suite12's "
                           "filler logs, the first --parallel of them)")
      ->delimiter(',');
  serve_memory->add_option("--max-tokens", sm.max_tokens, "New tokens per request (default 96)");
  serve_memory->add_option("--draft-layers", sm.draft_layers, "Drafter: the target's first K layers (default 1)");
  serve_memory->add_option("--draft-tokens", sm.draft_tokens, "Draft tokens per round (default 4)");
  serve_memory->add_option("--pool-pages", sm.pool_pages,
                           "Pages of the pool, 1..2^26 (default parallel x ceil(context / page))")
      ->check(CLI::Range(1, 1 << 26));
  serve_memory->add_option("--out", sm.out_file, "Write the receipt (kind serve-memory) here, atomically");
  // make-draft (issue 17): a draft checkpoint of its own from a target's first layers.
  std::string md_from, md_out;
  int md_layers = 0;
  auto* make_draft = app.add_subcommand(
      "make-draft",
      "Write a draft checkpoint made from a target checkpoint: its embedding, first --layers layers, final norm and "
      "head, same dtype and tensor bytes, config.json written from the target's parsed config (the fields the engine "
      "reads) with num_hidden_layers = --layers; read back and compared "
      "value for value. Reproducible (no time stamp or absolute path in the files). Exit 2 for an unreadable "
      "source, --layers not below the source's layers, or an --out that exists and is not an empty folder");
  make_draft->add_option("--from", md_from, "Target checkpoint folder")->required();
  make_draft->add_option("--layers", md_layers, "Layers to keep")->required();
  make_draft->add_option("--out", md_out, "Folder to write (created; must not hold files)")->required();
  std::string sg_junit;
  serve_gate->add_option("--junit", sg_junit, "Also write a JUnit XML file here (one testcase per gate and control)");
  // kv-gate (issue 18): a quantized KV cache teacher-forced against the bf16 cache, per depth.
  kc::engine::KvGateCommand kg;
  auto* kv_gate = app.add_subcommand(
      "kv-gate",
      "Fidelity gate of a quantized KV cache (fixtures/kv/*.json): the engine runs the fixture's frozen text "
      "teacher-forced with the bf16 cache and with --format; at each depth the scored rows' KL(bf16 || quantized) "
      "in float64 (mean, worst token, percentiles 99.9/99/95/90/50), top-token agreement with every difference "
      "and both arms' margins, perplexity of both arms, decode tok/s; recall probes (a passphrase planted at half "
      "the depth, asked at the end; a probe bf16 fails is uninformative); bytes per position of every format. "
      "Verdict: the fixture's bar (default mean KL <= 0.01, worst token <= 0.1) at every depth, no recall lost, "
      "every control red (q4 query not rotated, fp8 scales from the neighbouring row, one planted bad depth, "
      "and where both arms recall a probe, that probe's query zeroed). "
      "The bf16 arm is stored in --bf16-cache, keyed by fixture, checkpoint hash, engine commit and backend, and "
      "reused. Exit 0 pass, 1 fail, 2 bad fixture (the field is named), an unknown format or bad options, with "
      "nothing written");
  kv_gate->add_option("fixture", kg.fixture, "Fixture JSON file (fixtures/schema/kv-fixture.schema.json)")->required();
  kv_gate->add_option("--format", kg.format, "Quantized cache format: fp8, q4 or mxfp4 (required unless --bf16-only)");
  kv_gate->add_option("--backend", kg.backend, "cpu (default), cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  kv_gate->add_option("--out", kg.out_file, "Write the receipt (kind kv-gate) here, atomically");
  kv_gate->add_option("--bf16-cache", kg.bf16_cache,
                      "Folder of the stored bf16 arms (default kv-gate-cache); created when missing");
  kv_gate->add_flag("--bf16-only", kg.bf16_only,
                    "Compute (or find) the bf16 arm, store it in --bf16-cache and stop (no receipt): lets one command "
                    "run the bf16 arm and later ones each quantized arm");
  kv_gate->add_flag("--quiet", kg.quiet, "No progress lines on stderr (errors and warnings still go there)");
  // export (issue 19): inputs and our outputs for the independent oracle tools/oracle_torch.py.
  std::string ex_contract, ex_out, ex_backend = "auto", ex_seed = "1";
  int ex_cases = 16;
  auto* exp = app.add_subcommand(
      "export",
      "Write a contract's kind of generated inputs and our outputs as safetensors files plus manifest.json, for an "
      "oracle written with other code (python3 tools/oracle_torch.py DIR: PyTorch's float8/bfloat16 conversions, "
      "transformers' rotary embedding, SDPA in float64). Today: qwen-pages (rope store and attention, bf16 and fp8). "
      "Exit 2 for an unknown contract or an unwritable --out");
  exp->add_option("contract", ex_contract, "qwen-pages")->required();
  exp->add_option("--out", ex_out, "Folder to write (created)")->required();
  exp->add_option("--backend", ex_backend, "auto (default), cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  exp->add_option("--cases", ex_cases, "Cases (default 16)")->check(CLI::Range(1, 256));
  exp->add_option("--seed", ex_seed, "Seed of the inputs, 0 to 18446744073709551615")->type_name("UINT64");
  // premerge (issue 21): the pre-merge gate against a base folder of receipts.
  kc::PremergeOptions pm;
  auto* premerge = app.add_subcommand(
      "premerge",
      "The pre-merge gate: run every contract for the head (with the base receipts' seeds and case counts; on the "
      "cuda backend also bench attention and pack, and rope-store and compact where the base has them, each in the "
      "mode of the base's receipt, a bench run twice when rows are slower or a target the base met is missed, and the command of each serve-gate and "
      "kv-gate receipt in the base), or read the head's receipts from --head, "
      "diff each against the base folder's receipt, write premerge.md (verdict, regressions, tables: the comment a "
      "reviewer pastes) and the diffs in --out-dir. Exit 1 on any regression (a gate ok -> FAIL, a control red -> "
      "green, a target met -> not met (in both runs of a bench run twice), a bench row's time slower than --max-slowdown by every same-run ratio), each named; "
      "2 for a base of another backend or contract set (the mismatch named) or unreadable receipts");
  premerge->add_option("--base", pm.base_dir,
                       "Folder of the merge base's receipts (<contract>.json as kernel-contract --out-dir writes them, "
                       "bench-<name>.json, serve-gate and kv-gate receipts under any name), e.g. reports/cpu or a CI "
                       "artifact")
      ->required();
  premerge->add_option("--head", pm.head_dir, "Folder of the head's receipts: compare them instead of running the head");
  auto* pm_backend = premerge->add_option("--backend", pm.backend, "auto (cuda when a device is present), cpu or cuda")
                         ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  premerge->add_option("--out-dir", pm.out_dir,
                       "Folder for premerge.md, head/ (the head's receipts) and diff/ (default ./premerge; created)");
  premerge->add_option("--max-slowdown", pm.max_slowdown,
                       "A bench row slower than this factor by a same-run ratio (achieved / ceiling, ours / SDPA) is a "
                       "regression when every same-run ratio of that time says so: SDPA's own time can move between "
                       "sessions while the ceiling's does not (default 1.05)");
  premerge->add_option("--max-slowdown-short", pm.max_slowdown_short,
                       "The limit for launch-bound rows, whose base or head time is under --short-row-us: their ratios "
                       "against a copy of a few MiB move by up to 1.13x between two H200 sessions of one commit "
                       "(default 1.25)");
  premerge->add_option("--short-row-us", pm.short_row_us,
                       "Rows faster than this many microseconds are launch-bound (default 20)");
  premerge->add_option("--junit", pm.junit, "Also write a JUnit XML file here: the head's receipts, then one testcase per "
                                            "compared receipt (a failure lists its regressions)");
  premerge->add_flag("--allow-contract-changes", pm.allow_contract_changes,
                     "Accept a head that adds or removes contracts (new ones must pass; removed ones are listed)");
  premerge->add_option("--contracts", pm.contracts, "Only these contracts (comma-separated), e.g. for a change to one codec")
      ->delimiter(',');
  premerge->add_option("--base-bin", pm.base_bin,
                       "A tf-cuda-test built from the base receipts' commit (clean tree): rows slower in both runs are "
                       "timed again in a same-call A/B, two rounds of the base build's bench and then the head's over "
                       "those rows alone, and a time stays a regression only when the head is past its limit in every "
                       "round (receipts in head/ab/). A bench whose base receipt names another card (device.name) "
                       "than this device has every row timed so, and is compared by that A/B alone; without "
                       "--base-bin such a run is refused. Cuda runs only; not with --head");
  premerge->add_flag("--skip-gates", pm.skip_gates,
                     "Do not replay the base's serve-gate and kv-gate receipts (listed as not replayed). With --head, "
                     "a gate receipt the head folder holds is compared all the same (its regressions count); only "
                     "those it lacks are listed as not replayed. Without it "
                     "each runs its own command again with this build (--out in head/, a fresh --bf16-cache there), "
                     "from the current folder, so run premerge where the base's commands ran (the repository root); "
                     "a replay that fails to run or write its receipt is a regression");
  premerge->add_option("--script-dir", pm.script_dir, "Folder of bench_sdpa.py (default tools)");
  premerge->add_flag("--quiet", pm.quiet, "No progress lines on stderr");
  const auto is_command = [&](const std::string& a) {
    for (const char* b : kBuiltinCommands)
      if (a == b) return true;
    return kc::find_contract(a) != nullptr;
  };
  // Whole-number options are decimal: CLI11 reads them with strtoll's base 0, so 010 would be
  // octal 8 and 0x10 16 (the seed has its own decimal parser).
  const CLI::Validator decimal(
      [](std::string& v) -> std::string {
        const size_t d = v.size() > 1 && v[0] == '-' ? 1 : 0;
        if (v.size() == d || v.find_first_not_of("0123456789", d) != std::string::npos || (v[d] == '0' && v.size() > d + 1))
          return "expected a decimal integer (no leading zero, no 0x), got '" + v + "'";
        return std::string();
      },
      "");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt : sub->get_options()) {
      const std::string t = opt->get_type_name();
      // First (transform puts it before the range check): "1e3" or "12abc" is not a decimal
      // integer, which a range check would report as out of range.
      if (t.rfind("INT", 0) == 0 || t.rfind("UINT", 0) == 0) opt->transform(decimal);
    }
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    std::cerr << "tf-cuda-test: error: unknown contract or command '" << argv[1] << "'; known: " << known_commands()
              << "\n";
    return kUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsage;
  }
  // A file or folder option given an empty value (--out "", an unset variable in a script) is
  // refused: taken as not given, the run would pass and write nothing where its caller looks.
  for (CLI::App* sub : app.get_subcommands())
    for (CLI::Option* opt : sub->get_options()) {
      static const std::set<std::string> kPaths = {"--out", "--junit", "--merge-out", "--out-dir", "--profile",
                                                   "--serve-fixture", "--bf16-cache", "--script-dir", "--engine-model",
                                                   "--model", "--prompt-file", "--base", "--head", "--base-bin", "--from"};
      const bool path = kPaths.count(opt->get_name()) > 0;
      // --shard "" (an unset $SHARD) read as no shard ran every case on every runner.
      const bool value = opt->get_name() == "--kv-cache" || opt->get_name() == "--shard";
      if (opt->count() == 0 || (!path && !value)) continue;
      for (const std::string& v : opt->results())
        if (v.empty()) {
          std::cerr << "tf-cuda-test: error: " << sub->get_name() << ": " << opt->get_name()
                    << (path ? ": empty path: expected a file or folder name" : ": empty value")
                    << " (leave the option out for its default)\n";
          return kUsage;
        }
    }

  // Comma-separated lists: an empty item (2,,3 or 2, or a lone ,) is refused. CLI11 drops it, so
  // the run would plan other requests than the ones written (serve-memory --prompts), or a list
  // left empty took the next option as its value (premerge --contracts , --out-dir X said
  // "unknown contract '--out-dir'").
  for (const auto& [sub, opt, form] : {std::tuple<CLI::App*, std::string, std::string>{serve_memory, "--prompts", "N,N,..."},
                                       {premerge, "--contracts", "A,B,..."}}) {
    if (!sub->parsed()) continue;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      std::vector<std::string> vals;
      if (a.rfind(opt + "=", 0) == 0) vals.push_back(a.substr(opt.size() + 1));
      else if (a == opt)
        for (int k = i + 1; k < argc && std::string(argv[k]).rfind("--", 0) != 0; ++k) vals.push_back(argv[k]);
      for (const std::string& v : vals)
        if (v.empty() || v.front() == ',' || v.back() == ',' || v.find(",,") != std::string::npos) {
          std::cerr << "tf-cuda-test: error: " << sub->get_name() << " " << opt << " '" << v
                    << "': an empty item (expected " << form << ")\n";
          return kUsage;
        }
    }
  }

  if (list->parsed()) {
    for (const kc::ContractDef& c : kc::contracts())
      std::cout << c.name << "\t" << c.summary << " (default cases " << c.default_cases << ")\n";
    return 0;
  }

  if (make_model->parsed()) {
    uint64_t seed = 0;
    std::string why;
    if (!parse_seed(mm_seed, &seed, &why)) {
      std::cerr << "tf-cuda-test: error: " << why << "\n";
      return kUsage;
    }
    return kc::engine::make_model_command(mm_preset, mm_layers, seed, mm_out, std::cout, std::cerr);
  }

  if (generate->parsed()) {
    gen.prompt_given = gen_prompt->count() > 0;
    gen.argv = args;
    return kc::engine::generate_command(gen, std::cout, std::cerr);
  }

  if (serve_memory->parsed()) {
    sm.argv = args;
    sm.prompts_given = serve_memory->get_option("--prompts")->count() > 0;
    return kc::engine::serve_memory_command(sm, std::cout, std::cerr);
  }

  if (make_draft->parsed()) return kc::engine::make_draft_command(md_from, md_layers, md_out, std::cout, std::cerr);

  if (serve_gate->parsed()) {
    sg.argv = args;
    std::string why;
    if (!sg_junit.empty() && !kc::junit_writable(sg_junit, &why)) {
      std::cerr << "tf-cuda-test: error: " << why << "\n";
      return kUsage;
    }
    if (!sg_junit.empty() && !sg.out_file.empty() && kc::same_output(sg.out_file, sg_junit)) {
      std::cerr << "tf-cuda-test: error: serve-gate: --junit " << sg_junit << " and --out name the same file (" << sg.out_file
                << "): the JUnit XML would replace the receipt\n";
      return kUsage;
    }
    if (!sg_junit.empty() && kc::same_output(sg.fixture, sg_junit)) {
      std::cerr << "tf-cuda-test: error: serve-gate: --junit " << sg_junit << " names the fixture " << sg.fixture
                << ": the JUnit XML would replace it\n";
      return kUsage;
    }
    sg.junit_file = sg_junit;
    sg.junit_text = [](const nlohmann::json& r) { return kc::junit_text("tf-cuda-test serve-gate", {r}); };
    return kc::engine::serve_gate_command(sg, std::cout, std::cerr);
  }

  if (premerge->parsed()) {
    pm.argv = args;
    pm.backend_given = pm_backend->count() > 0;
    return kc::premerge_command(pm, std::cout, std::cerr);
  }

  if (kv_gate->parsed()) {
    kg.argv = args;
    return kc::engine::kv_gate_command(kg, std::cout, std::cerr);
  }

  if (exp->parsed()) {
    uint64_t seed = 0;
    std::string why;
    if (!parse_seed(ex_seed, &seed, &why)) {
      std::cerr << "tf-cuda-test: error: " << why << "\n";
      return kUsage;
    }
    if (ex_contract != "qwen-pages") {
      std::cerr << "tf-cuda-test: error: export: contract '" << ex_contract << "' has no export (known: qwen-pages)\n";
      return kUsage;
    }
    kc::Status st;
    auto be = kc::select_backend(ex_backend, &st);
    if (!be) {
      std::cerr << "tf-cuda-test: error: export " << st.message << "\n";
      return kUsage;
    }
    return kc::export_command(*be, ex_contract, ex_out, ex_cases, seed, args);
  }

  if (report->parsed())
    return kc::report_main(report_files, report_format, report_merge_out, report_junit, std::cout, std::cerr);

  if (diff->parsed()) return kc::diff_command(diff_base, diff_head, std::cout, std::cerr);

  if (bench->parsed()) {
    if (bench_what != "attention" && bench_what != "pack" && bench_what != "engine" && bench_what != "rope-store" &&
        bench_what != "compact") {
      std::cerr << "tf-cuda-test: error: bench '" << bench_what
                << "': not available (known: attention, pack, engine, rope-store, compact)\n";
      return kUsage;
    }
    // Options of one bench given to another are refused, not ignored.
    for (const CLI::Option* opt : {bench_script_dir, bench_chunk, bench_timing, bench_filter, bench_l2, bench_sdpa}) {
      const bool moves = bench_what == "rope-store" || bench_what == "compact";
      const bool applies = opt == bench_l2 ? moves
                           : bench_what == "attention" || (opt == bench_script_dir && bench_what == "engine") ||
                                 (opt == bench_filter && moves);
      if (opt->count() && !applies) {
        std::cerr << "tf-cuda-test: error: bench " << bench_what << ": " << opt->get_name() << " applies to "
                  << (opt == bench_filter       ? "bench attention, rope-store and compact"
                      : opt == bench_l2         ? "bench rope-store and compact"
                      : opt == bench_script_dir ? "bench attention and engine"
                                                : "bench attention")
                  << " only\n";
        return kUsage;
      }
    }
    for (const CLI::Option* opt : {bench_transformers, bench_engine_model, bench_layers, bench_tokens})
      if (opt->count() && bench_what != "engine") {
        std::cerr << "tf-cuda-test: error: bench " << bench_what << ": " << opt->get_name()
                  << " applies to bench engine only\n";
        return kUsage;
      }
    if (bench_what == "engine" && bench_reps->count() == 0) bo.reps = bo.quick ? 3 : 7;
    if (!bo.engine_profile.empty() && bench_what != "engine") {
      std::cerr << "tf-cuda-test: error: bench: --profile: only for bench engine\n";
      return kUsage;
    }
    if (!bo.engine_profile.empty() && !bench_out.empty()) {
      std::cerr << "tf-cuda-test: error: bench engine --profile writes its summary to the --profile path and no "
                   "receipt: --out " << bench_out << " would not be written\n";
      return kUsage;
    }
    if (!bo.engine_profile.empty()) {
      std::string pwhy;
      if (!output_writable(bo.engine_profile, &pwhy)) {
        std::cerr << "tf-cuda-test: error: bench: --profile " << pwhy << "\n";
        return kUsage;
      }
    }
    if (!filter_fits(bo.filter, "bench: ")) return kUsage;
    try {  // bad input is refused before a device is asked for
      std::regex check(bo.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::cerr << "tf-cuda-test: error: bench: --filter '" << bo.filter << "': not a valid regex (" << e.what() << ")\n";
      return kUsage;
    }
    if (bench_what == "rope-store" || bench_what == "compact") {
      const std::regex re(bo.filter, std::regex::ECMAScript);
      const auto cfgs = kc::bench_moves_configs(bo.quick);
      if (std::none_of(cfgs.begin(), cfgs.end(), [&](const std::string& c) { return kc::filter_search(c, re, bo.filter); })) {
        std::cerr << "tf-cuda-test: error: bench " << bench_what << ": --filter '" << bo.filter
                  << "' selects no row (rows read like '" << cfgs.back() << "')\n";
        return kUsage;
      }
    }
    // The python a bench runs beside it (SDPA, transformers) must be there before anything is timed:
    // a wrong --script-dir (or a run outside the repository root with the default) is bad input.
    for (const auto& [opt, v] : {std::pair{bench_sdpa, &bo.sdpa}, std::pair{bench_transformers, &bo.transformers}})
      if (opt->count() && v->empty()) {
        std::cerr << "tf-cuda-test: error: bench " << bench_what << ": " << opt->get_name()
                  << " '': expected a python command, or none\n";
        return kUsage;
      }
    if ((bench_what == "attention" && bo.sdpa != "none") || (bench_what == "engine" && bo.transformers != "none")) {
      const std::string script =
          bo.script_dir + (bench_what == "attention" ? "/bench_sdpa.py" : "/transformers_decode_bench.py");
      std::error_code sec;
      if (!std::filesystem::is_regular_file(script, sec)) {
        std::cerr << "tf-cuda-test: error: bench " << bench_what << ": --script-dir " << bo.script_dir << ": no "
                  << script << " (run from the repository root, or give --script-dir the folder of "
                  << script.substr(bo.script_dir.size() + 1) << ")\n";
        return kUsage;
      }
    }
    std::string why;
    if (!bench_out.empty() && !output_writable(bench_out, &why)) {
      std::cerr << "tf-cuda-test: error: bench: --out " << why << "\n";
      return kUsage;
    }
    kc::Status bst;
    auto cuda = kc::make_cuda_backend(&bst);
    if (!cuda) {
      std::cerr << "tf-cuda-test: error: bench " << bench_what << " needs a CUDA device (benches run on the GPU only): "
                << bst.message << "\n";
      return kUsage;
    }
    bo.device = kc::device_json(cuda->device());
    bo.argv = args;
    kc::Receipt rec;
    const int rc = bench_what == "pack"         ? kc::bench_pack_main(bo, &rec)
                   : bench_what == "engine"     ? kc::bench_engine_main(bo, *cuda, &rec)
                   : bench_what == "rope-store" ? kc::bench_rope_store_main(bo, &rec)
                   : bench_what == "compact"    ? kc::bench_compact_main(bo, &rec)
                                                : kc::bench_attention_main(bo, &rec);
    if (!bench_out.empty() && !rec.doc().is_null()) {
      const kc::Status w = kc::write_json_atomic(bench_out, rec);
      if (!w.ok) {
        std::cerr << "tf-cuda-test: error: " << w.message << "\n";
        return kUsage;
      }
      std::cout << "receipt: " << bench_out << "\n";
    }
    return rc;
  }

  // Every refusal of an option names the command first, as CLI11's own do ("fp8-rows: --seed: ...").
  const std::string cp = app.get_subcommands().empty() ? std::string() : app.get_subcommands().front()->get_name() + ": ";
  if (std::any_of(seed_options.begin(), seed_options.end(), [](const CLI::Option* x) { return x->count() > 0; })) {
    uint64_t seed = 0;
    std::string why;
    if (!parse_seed(o.seed, &seed, &why)) {
      std::cerr << "tf-cuda-test: error: " << cp << why << "\n";
      return kUsage;
    }
    o.seed_value = seed;
  }
  if (!filter_fits(o.filter, cp)) return kUsage;
  if (!o.filter.empty()) {
    try {
      std::regex re(o.filter);
    } catch (const std::regex_error& e) {
      std::cerr << "tf-cuda-test: error: " << cp << "--filter '" << o.filter << "' is not a valid regex: " << e.what() << "\n";
      return kUsage;
    }
  }
  std::string why;
  if (!o.shard.empty() && !kc::parse_shard(o.shard, &o.shard_i, &o.shard_n, &why)) {
    std::cerr << "tf-cuda-test: error: " << cp << why << "\n";
    return kUsage;
  }
  // kernel-contract runs each contract's default count of cases: a shard count above the
  // smallest would leave that contract's last shards without a case (they fail), on any code.
  if (all->parsed() && !o.shard.empty()) {
    const kc::ContractDef* least = nullptr;
    for (auto& [c, s] : subs)
      if (!least || c->default_cases < least->default_cases) least = c;
    if (least && o.shard_n > least->default_cases) {
      std::cerr << "tf-cuda-test: error: " << cp << "--shard '" << o.shard << "': kernel-contract splits every contract's cases, and "
                << least->name << " has " << least->default_cases << ": use at most " << least->default_cases
                << " shards\n";
      return kUsage;
    }
  }
  // Outputs are checked before the backend is asked for and before a long run.
  if (!o.junit.empty() && !kc::junit_writable(o.junit, &why)) {
    std::cerr << "tf-cuda-test: error: " << cp << why << "\n";
    return kUsage;
  }
  for (auto& [c, s] : subs)
    if (s->parsed() && !o.out.empty() && !output_writable(o.out, &why)) {
      std::cerr << "tf-cuda-test: error: " << cp << "--out " << why << "\n";
      return kUsage;
    }
  // --junit naming a receipt's file: the XML would replace the receipt after the run.
  if (!o.junit.empty()) {
    std::vector<std::pair<std::string, std::string>> outs;  // (option, path)
    for (auto& [c, s] : subs) {
      if (s->parsed() && !o.out.empty()) outs.push_back({"--out", o.out});
      if (all->parsed()) outs.push_back({"--out-dir", (std::filesystem::path(o.out_dir) / (c->name + ".json")).string()});
    }
    if (all->parsed()) outs.push_back({"--out-dir", (std::filesystem::path(o.out_dir) / "serve-gate.json").string()});
    for (const auto& [opt, path] : outs)
      if (kc::same_output(path, o.junit)) {
        std::cerr << "tf-cuda-test: error: " << cp << "--junit " << o.junit << " and " << opt << " name the same file (" << path
                  << "): the JUnit XML would replace the receipt\n";
        return kUsage;
      }
  }
  std::string serve_fixture;
  if (all->parsed()) {
    serve_fixture = find_serve_fixture(o.serve_fixture);
    if (serve_fixture.empty()) {
      std::cerr << "tf-cuda-test: error: kernel-contract: the serve fixture fixtures/serve/ci.json is neither in the "
                   "working directory nor in the source tree " << KC_SOURCE_DIR << ": pass --serve-fixture FILE\n";
      return kUsage;
    }
    // A bad fixture is refused before any contract runs or any receipt is written.
    kc::engine::ServeFixture fx;
    std::string text, fwhy;
    // Its checkpoints too (the model, the draft, the formats, the arena): serve-gate would refuse
    // those only after every contract had run and written its receipt.
    kc::engine::ServeModels models;
    if (!kc::engine::read_serve_fixture(serve_fixture, &fx, &text, &fwhy) ||
        !kc::engine::load_serve_models(serve_fixture, fx, &models, &fwhy)) {
      std::cerr << "tf-cuda-test: error: kernel-contract: --serve-fixture " << fwhy << "\n";
      return kUsage;
    }
    for (auto& [c, s] : subs)
      if (!output_writable((std::filesystem::path(o.out_dir) / (c->name + ".json")).string(), &why)) {
        std::cerr << "tf-cuda-test: error: " << cp << "--out-dir " << why << "\n";
        return kUsage;
      }
    if (!output_writable((std::filesystem::path(o.out_dir) / "serve-gate.json").string(), &why)) {
      std::cerr << "tf-cuda-test: error: " << cp << "--out-dir " << why << "\n";
      return kUsage;
    }
    // Nor may an output replace the serve fixture the run reads (--junit wrote its XML over
    // fixtures/serve/ci.json, after every contract had run).
    std::vector<std::pair<std::string, std::string>> outs;  // (option, path)
    if (!o.junit.empty()) outs.push_back({"--junit", o.junit});
    for (auto& [c, s] : subs) outs.push_back({"--out-dir", (std::filesystem::path(o.out_dir) / (c->name + ".json")).string()});
    outs.push_back({"--out-dir", (std::filesystem::path(o.out_dir) / "serve-gate.json").string()});
    for (const auto& [opt, path] : outs)
      if (kc::same_output(path, serve_fixture)) {
        std::cerr << "tf-cuda-test: error: kernel-contract: " << opt << " " << (opt == "--junit" ? o.junit : o.out_dir)
                  << " names the serve fixture " << serve_fixture << " (as " << path << "): the output would replace it\n";
        return kUsage;
      }
  }
  const std::string command = app.get_subcommands().front()->get_name();
  kc::Status st;
  auto be = kc::select_backend(o.backend, &st);
  if (!be) {
    std::cerr << "tf-cuda-test: error: " << command << " " << st.message << "\n";
    return kUsage;
  }

  // --junit: the receipts of this run, written once it ends.
  std::vector<nlohmann::json> receipts;
  auto write_junit = [&](int rc) {
    if (o.junit.empty()) return rc;
    // Exit 2 (a receipt that could not be written, a refused fixture): no JUnit either. A JUnit
    // of a run whose receipt write failed once read green beside an exit 2.
    if (rc == kUsage) {
      std::cerr << "tf-cuda-test: note: --junit " << o.junit << " not written (the run exits 2)\n";
      return rc;
    }
    const kc::Status w = kc::write_junit(o.junit, "tf-cuda-test " + command, receipts);
    if (!w.ok) {
      std::cerr << "tf-cuda-test: error: " << cp << "--junit " << w.message << "\n";
      return kUsage;
    }
    return rc;
  };
  for (auto& [c, s] : subs)
    if (s->parsed()) {
      receipts.emplace_back();
      return run_one(*c, *be, o, *s, args, o.out, &receipts.back(), "", o.junit);  // --junit written with --out
    }

  // kernel-contract: every contract, one receipt each. The receipts an earlier run left under
  // the names this run writes go first: a run stopped part way (SIGTERM) left them beside its
  // own, and report and premerge --head read the folder as one passing run.
  {
    std::vector<std::string> stale = {"serve-gate.json"};
    for (auto& [c, s] : subs) stale.push_back(c->name + ".json");
    std::vector<std::string> removed;
    for (const std::string& f : stale) {
      const std::filesystem::path fp = std::filesystem::path(o.out_dir) / f;
      std::error_code sec, ec;
      if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(fp, sec))) continue;  // none there (or a link)
      if (std::filesystem::remove(fp, ec))
        removed.push_back(f);
      else if (ec) {
        std::cerr << "tf-cuda-test: error: " << cp << "--out-dir " << fp.string() << ": an earlier run's receipt cannot be removed ("
                  << ec.message() << ")\n";
        return kUsage;
      }
    }
    if (!removed.empty())
      std::cerr << "tf-cuda-test: note: --out-dir " << o.out_dir << ": removed " << removed.size()
                << " receipt" << (removed.size() == 1 ? "" : "s") << " of an earlier run under the names this run writes\n";
  }
  std::vector<std::pair<std::string, int>> results;
  // A receipt that cannot be written (a full disk, a folder gone read-only) ends the run there:
  // the run exits 2 whatever comes after, so the contracts left would only spend their time.
  for (auto& [c, s] : subs) {
    const std::string out = (std::filesystem::path(o.out_dir) / (c->name + ".json")).string();
    receipts.emplace_back();
    const int rc = run_one(*c, *be, o, *all, args, out, &receipts.back(),
                           c->name + " [" + std::to_string(results.size() + 1) + "/" + std::to_string(subs.size()) + "]");
    results.push_back({c->name, rc});
    if (rc == kUsage) break;
  }
  if (!results.empty() && results.back().second == kUsage) {
    std::cout << "\nkernel-contract on " << be->name() << ": stopped at " << results.back().first
              << " (its receipt was not written):\n";
    for (size_t i = 0; i < subs.size(); ++i)
      std::cout << "  " << subs[i].first->name << ": "
                << (i + 1 < results.size() ? (results[i].second == 0 ? "pass" : "FAIL")
                                           : i + 1 == results.size() ? "receipt not written" : "not run")
                << "\n";
    std::cout << "  serve-gate (" << std::filesystem::path(serve_fixture).filename().string() << "): not run\n";
    std::cerr << "tf-cuda-test: error: kernel-contract stopped after " << results.size() << " of " << subs.size()
              << " contracts: the receipt of " << results.back().first << " could not be written\n";
    return write_junit(kUsage);
  }
  {
    // The serving gates (issue 17) on the same backend: the ci fixture's arms and controls.
    kc::engine::ServeGateCommand sgc;
    sgc.fixture = serve_fixture;
    sgc.backend = be->name();
    sgc.out_file = (std::filesystem::path(o.out_dir) / "serve-gate.json").string();
    sgc.argv = args;
    sgc.quiet = o.quiet;
    nlohmann::json sgr;  // for --junit: the serve gate is one of the run's receipts
    sgc.receipt = &sgr;
    std::cout << "\nserve-gate " << serve_fixture << " on " << be->name() << ":\n";
    const int rc = kc::engine::serve_gate_command(sgc, std::cout, std::cerr);
    if (!sgr.is_null()) receipts.push_back(std::move(sgr));
    results.push_back({"serve-gate (" + std::filesystem::path(serve_fixture).filename().string() + ")", rc});
  }
  // The exit code is the worst of the list printed: no line reads FAIL under an exit 0.
  int worst = 0;
  std::cout << "\nkernel-contract on " << be->name() << ":\n";
  for (const auto& [name, rc] : results) {
    std::cout << "  " << name << ": " << (rc == 0 ? "pass" : "FAIL") << "\n";
    worst = std::max(worst, rc);
  }
  // JSON files in --out-dir that this run did not write (an earlier run's, a contract's that
  // is gone): `report DIR/*.json` would read them beside this run's. Named, never removed.
  {
    std::set<std::string> wrote = {"serve-gate.json"};
    for (auto& [c, s] : subs) wrote.insert(c->name + ".json");
    std::vector<std::string> other;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(o.out_dir, ec)) {
      const std::string f = e.path().filename().string();
      if (e.path().extension() == ".json" && e.is_regular_file(ec) && !wrote.count(f)) other.push_back(f);
    }
    std::sort(other.begin(), other.end());
    if (!other.empty()) {
      std::cerr << "tf-cuda-test: note: --out-dir " << o.out_dir << " also holds " << other.size()
                << " JSON file" << (other.size() == 1 ? "" : "s") << " this run did not write (report "
                << (std::filesystem::path(o.out_dir) / "*.json").string() << " would read them too):";
      for (size_t i = 0; i < other.size() && i < 10; ++i) std::cerr << " " << other[i];
      if (other.size() > 10) std::cerr << " and " << other.size() - 10 << " more";
      std::cerr << "\n";
    }
  }
  return write_junit(worst);
}
