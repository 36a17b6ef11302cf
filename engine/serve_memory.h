// `tf-cuda-test serve-memory --preset P [--layers N] --parallel L --context C [--page P]
// [--kv-cache F] [--prompts N1,N2,...] [--max-tokens M] [--draft-layers K] [--draft-tokens D]
// [--pool-pages N] [--out FILE]`: the memory receipt of issue 17 (kind "serve-memory").
//
// For a model shape (a make-model preset; no weights are read or made) it plans the
// serving arena as serve() does (plan_serve_arena, serve_positions) in three arms and
// admits the requests (prompt lengths N_i, M new tokens each, request i on lane i) into
// a real Pool the way serve() admits at its first round (free pages checked, the lane's
// run planned with plan_run and claimed, then its pages taken):
//   windows         the pool off: every lane a window of C positions in its run
//   pool            every lane on pages (pages-all), no runs
//   pool-with-runs  serve-gate's drafted arm: lane 0 keeps a window, every lane's run
//                   holds its drafter's cache (the target's first K layers, C positions),
//                   requests hold one draft window more (D + 1 tail slots)
// Per arm: bytes fixed per lane (the largest run), the runs' parts and offsets, pages
// taken, bytes in use (pages taken x page stride + the runs claimed), the arena's bytes
// and the pages left free. --pool-pages defaults to L x ceil(C / P) (every lane at full
// context, the windows' guarantee).
//
// Gates: "admitted" (every request admitted in every arm), "run planning" (every lane's
// run held its parts). Controls: "run-one-part-short" (runs sized one part short:
// refused at planning), "pool-one-page-short" (the pool arm's pool one page smaller than
// the requests take). No forward runs and nothing is timed: the numbers are the same on
// every backend; the receipt's backend is cpu. Exit 0 pass, 1 fail, 2 bad options
// (named) with nothing written.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace kc::engine {

struct ServeMemoryCommand {
  std::string preset;
  int layers = 0;  // 0: the preset's default
  int parallel = 4;
  int context = 32768;
  int page = 256;
  std::string kv_cache = "bf16";
  std::vector<int> prompts = {1201, 2804, 4413, 6003};  // suite12's four filler logs
  bool prompts_given = false;  // false: the defaults, the first --parallel of them
  int max_tokens = 96;
  int draft_layers = 1;
  int draft_tokens = 4;
  int pool_pages = 0;  // 0: parallel x ceil(context / page)
  std::string out_file;
  std::vector<std::string> argv;
};

int serve_memory_command(const ServeMemoryCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kc::engine
