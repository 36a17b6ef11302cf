// Greedy decoding on the engine: prefill in chunks, then one token per step for every
// active lane, all lanes' rows of a step in ONE Model::forward batch.
//
// Tokenizer of the byte-level fixture models (tools/train_fixture_model.py): ids 0..255
// are the bytes, 256 <|bos|>, 257 <|eos|>, 258 <|pad|>, 259 <|sep|>. The training stream
// is every file's bytes followed by <|eos|> (bos never occurs in it), so a prompt is
// encoded as <|eos|> (the separator that precedes every file start) followed by its
// bytes. Decoding stops at <|eos|> (not part of the continuation) or after max_tokens.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "engine/model.h"

namespace kc::engine {

constexpr int32_t kTokBos = 256;
constexpr int32_t kTokEos = 257;

// <|eos|> then the bytes of `text`.
std::vector<int32_t> encode_prompt(const std::string& text);
// Bytes of ids < 256; specials are dropped.
std::string decode_bytes(const std::vector<int32_t>& ids);

struct GenerateRequest {
  std::vector<int32_t> prompt;  // at least one token
  int max_tokens = 0;           // tokens to generate (>= 1)
  int32_t page = 0;             // 0: a window lane; otherwise pages of this many positions
};

struct GenerateOptions {
  int prefill_chunk = 64;      // prompt rows per lane per prefill step
  bool keep_logits = false;    // record the logits row behind every generated token
  bool stop_at_eos = true;     // false: <|eos|> is a token like any other (benchmarks: every lane
                               // decodes exactly max_tokens)
};

struct GenerateResult {
  std::vector<int32_t> tokens;            // generated ids (eos excluded)
  bool stopped_at_eos = false;
  std::vector<std::vector<float>> logits;  // keep_logits: one row per generated token (and the eos row)
};

struct GenerateStats {
  double prefill_s = 0;        // until every lane's first token (time to first token)
  double decode_s = 0;         // the decode steps after that
  int64_t decode_tokens = 0;   // tokens produced by decode steps (first tokens excluded)
  int64_t decode_steps = 0;
  uint64_t cache_bytes = 0;    // the arena (every lane)
  double decode_tok_s() const { return decode_s > 0 ? double(decode_tokens) / decode_s : 0.0; }
};

// Decodes every request greedily on one cache (lane i = request i). Refuses an empty
// prompt, max_tokens < 1, a token out of the vocabulary, a length past the model's
// max_position_embeddings, or a page size above it.
Status generate(const Model& model, Backend& be, const std::vector<GenerateRequest>& reqs, const GenerateOptions& opts,
                std::vector<GenerateResult>* out, GenerateStats* stats = nullptr);

// `tf-cuda-test generate`: loads the model, decodes `prompt` greedily, prints the
// continuation on `out`, writes a receipt (kind generate: tokens, time to first token,
// decode tok/s, cache bytes, the checkpoint's hash) to `out_file` when given. 0 on success,
// 1 on a backend failure, 2 on bad input (named on `err`).
struct GenerateCommand {
  std::string model_dir;
  std::string prompt;
  std::string prompt_file;
  bool prompt_given = false;
  int max_tokens = 0;
  std::string kv_cache = "bf16";
  int pages = 0;
  std::string backend = "cpu";
  std::string out_file;
  std::vector<std::string> argv;
};
int generate_command(const GenerateCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kc::engine
