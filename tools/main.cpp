// tf-cuda-test: the command line of kernel-contracts.
//   tf-cuda-test list
//   tf-cuda-test <contract> [--backend auto|cpu|cuda] [--seed N] [--cases N] [--filter REGEX | --case LINE] [--out FILE]
//   tf-cuda-test kernel-contract [--backend ...] [--seed N] [--out-dir DIR]
//   tf-cuda-test bench {attention|pack|rope-store|compact} [--quick] [--reps N] [--out FILE]   (cuda only)
//   tf-cuda-test report RECEIPT... [--format md|text]
//   tf-cuda-test diff BASE HEAD
//   tf-cuda-test generate --model DIR --prompt TEXT|--prompt-file F --max-tokens N [--kv-cache F] [--pages P]
//   tf-cuda-test serve-gate FIXTURE [--backend cpu|cuda] [--out FILE]
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
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "contracts/contracts.h"
#include "contracts/framework.h"
#include "engine/generate.h"
#include "engine/kv_gate.h"
#include "engine/serve_gate.h"
#include "tools/export.h"
#include "engine/make_model.h"
#include "tools/bench_attention.h"
#include "tools/bench_moves.h"
#include "tools/bench_pack.h"
#include "tools/receipt_views.h"

namespace {

constexpr int kUsage = 2;

struct Common {
  std::string backend = "auto";
  std::string seed;                   // as typed; parse_seed turns it into seed_value
  std::optional<uint64_t> seed_value;  // set when --seed was given (0 .. 2^64 - 1)
  int cases = 0;
  std::string filter;
  std::string case_line;
  std::string out;
  std::string out_dir = "receipts";
  bool quiet = false;
  bool gates_only = false;
};

// The commands besides the contracts (each contract is a command of its own name).
constexpr const char* kBuiltinCommands[] = {"list", "kernel-contract", "bench", "report", "diff", "make-model", "generate", "serve-gate", "kv-gate", "export"};

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
            const std::vector<std::string>& argv, const std::string& out) {
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
  ro.gates_only = o.gates_only;
  const kc::RunResult r = kc::run_contract(c, be, ro);
  std::cout << kc::summary_table(r.receipt) << std::flush;
  if (!out.empty()) {
    const kc::Status st = kc::write_json_atomic(out, r.receipt);
    if (!st.ok) {
      std::cerr << "tf-cuda-test: error: " << st.message << "\n";
      return kUsage;
    }
    std::cout << "receipt: " << out << "\n";
  }
  return r.pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  CLI::App app{
      "tf-cuda-test: kernel contracts for paged attention kernels.\n"
      "Each contract pairs CUDA kernels (backend cuda) or their host twins (backend cpu)\n"
      "with float64 references, checks its gates on generated cases and proves it can\n"
      "fail with planted controls that must be red.\n"
      "Exit codes: 0 pass, 1 a gate failed or a control was green, 2 bad usage or input."};
  app.require_subcommand(1, 1);
  app.fallthrough(false);

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
  std::vector<std::pair<const kc::ContractDef*, CLI::App*>> subs;
  for (const kc::ContractDef& c : kc::contracts()) {
    auto* s = app.add_subcommand(c.name, c.summary);
    add_run_options(s);
    s->add_option("--cases", o.cases, "Number of generated cases (default " + std::to_string(c.default_cases) + ")")
        ->check(kAtLeastOne);
    auto* filter = s->add_option("--filter", o.filter,
                                 "Run only cases whose name(k=v,...) line matches this ECMAScript regex (searched); a "
                                 "filter that matches no case fails the run");
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
    subs.push_back({&c, s});
  }
  auto* all = app.add_subcommand("kernel-contract", "Run every contract; one receipt each in --out-dir");
  add_run_options(all);
  all->add_option("--out-dir", o.out_dir,
                  "Folder for the receipts, <contract>.json each (default ./receipts; created with its parents if "
                  "missing; each receipt is written as --out writes one)");

  std::string bench_what;
  kc::BenchOptions bo;
  std::string bench_out;
  auto* bench = app.add_subcommand("bench", "Benchmarks on the GPU (cuda only): attention, pack, rope-store, compact");
  bench->add_option("what", bench_what,
                    "What to time: attention (split-K partial + merge), pack (scale-plane pack / unpack kernels), "
                    "rope-store (the rope store kernel) or compact (the keep kernel); rope-store and compact against a "
                    "copy of the same bytes, 1 MiB .. 1 GiB moved, bf16 / fp8 / q4, pages of 16 and 256 and a window")
      ->required();
  bench->add_flag("--quick", bo.quick,
                  "attention: batches 1, 8 and contexts 4K, 32K only; pack: blobs of 16 and 64 MiB only; rope-store, "
                  "compact: 4, 64 and 256 MiB only");
  bench->add_option("--reps", bo.reps, "Timed runs per configuration (median reported)")->check(kAtLeastOne);
  bench->add_option("--out", bench_out,
                    "Write the bench receipt here, atomically; missing folders are created, an existing path that is "
                    "not a regular file is refused, a symlink is followed");
  auto* bench_script_dir = bench->add_option("--script-dir", bo.script_dir, "attention: folder of bench_sdpa.py (default tools)");
  auto* bench_chunk = bench->add_option("--chunk", bo.chunk, "attention: key chunk width of the split-K partial (default 512)")
      ->check(CLI::Range(1, 1024));
  auto* bench_filter = bench->add_option("--filter", bo.filter,
                    "attention: time only the rows whose config/format/addressing (as printed, e.g. "
                    "'24q/4kv/d256/b8/ctx32768/bf16/window') matches this ECMAScript regex; unmeasured targets read "
                    "'not measured'. rope-store, compact: the rows whose size/format/addressing (e.g. "
                    "'256MiB/q4/p16') matches; a filter that selects no row exits 2");
  std::vector<std::string> report_files;
  std::string report_format = "md";
  auto* report = app.add_subcommand(
      "report",
      "Render receipts as the Markdown tables a reviewer pastes into a pull request (or aligned text): what ran "
      "where, gates with their worst cases, controls and what caught each, bench targets and rows. Exit 0 when "
      "every receipt's verdict is pass, 1 when one is fail, 2 when a file is not a readable receipt (nothing is "
      "printed then)");
  report->add_option("receipts", report_files, "Receipt files (JSON, as written by --out)")->required();
  report->add_option("--format", report_format, "md (default) or text")->check(CLI::IsMember({"md", "text"}));
  std::string diff_base, diff_head;
  auto* diff = app.add_subcommand(
      "diff",
      "What changed from BASE to HEAD, two receipts of the same contract or bench: verdict, gates (results, "
      "counts, worst ratios), controls, bench targets and the largest timing changes, measured numbers. "
      "Regressions (a gate ok -> FAIL or removed, a control red -> GREEN or removed, verdict pass -> fail, a "
      "target met -> not met) are listed first and make the exit code 1; 2 for unreadable or incomparable "
      "receipts");
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
      ->check(CLI::IsMember({"bf16", "fp8", "q4"}));
  generate->add_option("--pages", gen.pages, "Page size in positions (default 0: one contiguous window)")
      ->check(CLI::Range(0, 1 << 20));
  generate->add_option("--backend", gen.backend, "cpu (host twins, default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  generate->add_option("--out", gen.out_file,
                       "Write a JSON result (tokens, time to first token, decode tok/s, cache bytes) here, atomically");
  // serve-gate (issue 17): replays a serve fixture's gates and controls, writes a receipt.
  kc::engine::ServeGateCommand sg;
  auto* serve_gate = app.add_subcommand(
      "serve-gate",
      "Replay a serve fixture (fixtures/serve/*.json): every prompt alone, all at once forward and reverse with "
      "queued requests, pages vs windows, drafted, resumed from a packed prompt state, per cache format; gates "
      "concurrent == solo, paged == contiguous, drafted == plain, resumed == fresh, golden; engine controls must be "
      "red. Exit 2 for a bad fixture (the field is named) with nothing written");
  serve_gate->add_option("fixture", sg.fixture, "Fixture JSON file")->required();
  serve_gate->add_option("--backend", sg.backend, "cpu (default) or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  serve_gate->add_option("--out", sg.out_file, "Write the receipt (kind serve-gate) here, atomically");
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
      "every control red (q4 query not rotated, fp8 scales from the neighbouring row, one planted bad depth). "
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
  const auto is_command = [&](const std::string& a) {
    for (const char* b : kBuiltinCommands)
      if (a == b) return true;
    return kc::find_contract(a) != nullptr;
  };
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

  if (serve_gate->parsed()) {
    sg.argv = args;
    return kc::engine::serve_gate_command(sg, std::cout, std::cerr);
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
    return kc::report_command(report_files, report_format == "text" ? kc::ViewFormat::text : kc::ViewFormat::md,
                              std::cout, std::cerr);

  if (diff->parsed()) return kc::diff_command(diff_base, diff_head, std::cout, std::cerr);

  if (bench->parsed()) {
    if (bench_what != "attention" && bench_what != "pack" && bench_what != "rope-store" && bench_what != "compact") {
      std::cerr << "tf-cuda-test: error: bench '" << bench_what
                << "': not available (known: attention, pack, rope-store, compact)\n";
      return kUsage;
    }
    // Options of one bench given to another are refused, not ignored.
    for (const CLI::Option* opt : {bench_script_dir, bench_chunk, bench_filter}) {
      const bool applies = bench_what == "attention" || (opt == bench_filter && bench_what != "pack");
      if (opt->count() && !applies) {
        std::cerr << "tf-cuda-test: error: bench " << bench_what << ": " << opt->get_name() << " applies to "
                  << (opt == bench_filter ? "bench attention, rope-store and compact" : "bench attention") << " only\n";
        return kUsage;
      }
    }
    try {  // bad input is refused before a device is asked for
      std::regex check(bo.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::cerr << "tf-cuda-test: error: --filter '" << bo.filter << "': not a valid regex (" << e.what() << ")\n";
      return kUsage;
    }
    if (bench_what == "rope-store" || bench_what == "compact") {
      const std::regex re(bo.filter, std::regex::ECMAScript);
      const auto cfgs = kc::bench_moves_configs(bo.quick);
      if (std::none_of(cfgs.begin(), cfgs.end(), [&](const std::string& c) { return std::regex_search(c, re); })) {
        std::cerr << "tf-cuda-test: error: bench " << bench_what << ": --filter '" << bo.filter
                  << "' selects no row (rows read like '" << cfgs.back() << "')\n";
        return kUsage;
      }
    }
    std::string why;
    if (!bench_out.empty() && !output_writable(bench_out, &why)) {
      std::cerr << "tf-cuda-test: error: --out " << why << "\n";
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

  if (std::any_of(seed_options.begin(), seed_options.end(), [](const CLI::Option* x) { return x->count() > 0; })) {
    uint64_t seed = 0;
    std::string why;
    if (!parse_seed(o.seed, &seed, &why)) {
      std::cerr << "tf-cuda-test: error: " << why << "\n";
      return kUsage;
    }
    o.seed_value = seed;
  }
  if (!o.filter.empty()) {
    try {
      std::regex re(o.filter);
    } catch (const std::regex_error& e) {
      std::cerr << "tf-cuda-test: error: --filter '" << o.filter << "' is not a valid regex: " << e.what() << "\n";
      return kUsage;
    }
  }
  // Outputs are checked before the backend is asked for and before a long run.
  std::string why;
  for (auto& [c, s] : subs)
    if (s->parsed() && !o.out.empty() && !output_writable(o.out, &why)) {
      std::cerr << "tf-cuda-test: error: --out " << why << "\n";
      return kUsage;
    }
  if (all->parsed())
    for (auto& [c, s] : subs)
      if (!output_writable((std::filesystem::path(o.out_dir) / (c->name + ".json")).string(), &why)) {
        std::cerr << "tf-cuda-test: error: --out-dir " << why << "\n";
        return kUsage;
      }
  const std::string command = app.get_subcommands().front()->get_name();
  kc::Status st;
  auto be = kc::select_backend(o.backend, &st);
  if (!be) {
    std::cerr << "tf-cuda-test: error: " << command << " " << st.message << "\n";
    return kUsage;
  }

  for (auto& [c, s] : subs)
    if (s->parsed()) return run_one(*c, *be, o, *s, args, o.out);

  // kernel-contract: every contract, one receipt each.
  int worst = 0;
  std::vector<std::pair<std::string, int>> results;
  for (auto& [c, s] : subs) {
    const std::string out = (std::filesystem::path(o.out_dir) / (c->name + ".json")).string();
    const int rc = run_one(*c, *be, o, *all, args, out);
    results.push_back({c->name, rc});
    worst = std::max(worst, rc);
  }
  std::cout << "\nkernel-contract on " << be->name() << ":\n";
  for (const auto& [name, rc] : results) std::cout << "  " << name << ": " << (rc == 0 ? "pass" : "FAIL") << "\n";
  return worst;
}
