// tf-cuda-test export qwen-pages: generated inputs of the rope store and split-K attention and
// our outputs, as safetensors files and a manifest, for an oracle written elsewhere
// (tools/oracle_torch.py: PyTorch's float8 and bfloat16 conversions, transformers' rotary
// embedding, SDPA in float64). See export.h.
#include "tools/export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "engine/safetensors.h"
#include "contracts/framework.h"
#include "kernels/codecs/fp8.h"

namespace kc {
namespace {

struct ExportCase {
  int d, q_heads, kv_heads, rot, len, queries, page, chunk, pos_offset;
  double base;
  float scale;
  Format fmt;
};

// Shapes the Qwen models use (head_dim 128 with 8 KV heads of 32 query heads, the 27B
// attention shape 24 q / 4 kv x 256 with partial rotary 64, the fixture model's 64), odd
// lengths across chunk edges, both formats the oracle can decode on its own (bf16, fp8),
// paged and window, three softmax scales (1/sqrt(d), 1/d, 1: large logits), and RoPE
// positions offset by 250,000 in every fourth case (the angle of a row is pos_offset + its
// cache position; attention only sees differences, so it is unchanged in exact arithmetic).
std::vector<ExportCase> export_cases(int count) {
  struct Shape { int d, qh, kvh, rot; double base; };
  const Shape shapes[] = {{128, 32, 8, 128, 1e6}, {256, 24, 4, 64, 1e7}, {64, 4, 2, 64, 1e4}, {128, 16, 2, 64, 1e6}};
  const int lens[] = {1, 37, 300, 1100, 2049};
  std::vector<ExportCase> out;
  for (int i = 0; i < count; ++i) {
    const Shape& s = shapes[i % 4];
    ExportCase c{};
    c.d = s.d, c.q_heads = s.qh, c.kv_heads = s.kvh, c.rot = s.rot, c.base = s.base;
    c.len = lens[(i / 2) % 5];
    c.queries = std::min(c.len, 3);
    c.fmt = (i / 4) % 2 == 0 ? Format::bf16 : Format::fp8;
    c.page = i % 3 == 0 ? 0 : (i % 3 == 1 ? 16 : 256);
    c.chunk = (i % 5 == 0) ? 32 : 256;
    c.pos_offset = i % 4 == 3 ? 250000 : 0;  // RoPE angles near Qwen3.5's 262,144 positions
    c.scale = i % 3 == 2 ? 1.0f : (i % 5 == 4 ? 1.0f / float(s.d) : 1.0f / std::sqrt(float(s.d)));
    out.push_back(c);
  }
  return out;
}

std::string case_line(int i, const ExportCase& c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "export(i=%d,d=%d,qh=%d,kvh=%d,rot=%d,base=%g,len=%d,q=%d,fmt=%s,page=%d,chunk=%d,scale=%.9g,pos0=%d)",
                i, c.d, c.q_heads, c.kv_heads, c.rot, c.base, c.len, c.queries, format_name(c.fmt), c.page, c.chunk,
                double(c.scale), c.pos_offset);
  return buf;
}

// Values of a generated row: mostly normal, with rows that reach the fp8 encoder's edges
// (one large value and the rest far below it, so codes land in E4M3's subnormals; values
// whose quotient by the scale ties between two codes).
void fill_rows(std::mt19937_64& rng, std::vector<float>& x, int rows, int d, bool edges) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  x.resize(size_t(rows) * d);
  for (auto& v : x) v = n(rng);
  if (!edges) return;
  for (int r = 0; r < rows; ++r) {
    float* row = x.data() + size_t(r) * d;
    switch (r % 7) {
      case 1:  // subnormal codes: values near 2^-8 beside one of 448 (scale 1)
        for (int j = 0; j < d; ++j) row[j] *= std::ldexp(1.0f, -8);
        row[r % d] = 448.0f;
        break;
      case 3:  // ties: quotients k + 1/2 on the E4M3 grid between 8 and 16 (step 1)
        for (int j = 0; j < d; ++j) row[j] = float(8 + (j % 8)) + 0.5f;
        row[0] = 448.0f;
        break;
      case 5:  // large magnitudes (logits of hundreds with scale 1)
        for (int j = 0; j < d; ++j) row[j] *= 30.0f;
        break;
      default:
        break;
    }
  }
}

}  // namespace

int export_command(Backend& be, const std::string& contract, const std::string& out_dir, int cases, uint64_t seed,
                   const std::vector<std::string>& argv) {
  namespace fs = std::filesystem;
  using engine::Dtype;
  using engine::TensorToWrite;
  if (contract != "qwen-pages") {
    std::cerr << "tf-cuda-test: error: export: contract '" << contract
              << "' has no export (only qwen-pages: rope store and attention, bf16 and fp8)\n";
    return 2;
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) {
    std::cerr << "tf-cuda-test: error: export: --out " << out_dir << ": cannot create the folder ("
              << (ec ? ec.message() : "not a folder") << ")\n";
    return 2;
  }
  // The manifest goes last, and a previous one goes first: a run that fails part way leaves no
  // manifest that describes files of another run (the oracle reads only what a manifest lists).
  const std::string mpath = (fs::path(out_dir) / "manifest.json").string();
  fs::remove(mpath, ec);
  if (fs::exists(mpath)) {
    std::cerr << "tf-cuda-test: error: export: --out " << mpath << ": cannot remove the previous manifest\n";
    return 2;
  }
  // So are a previous export's case files (caseN.safetensors, the names this command writes):
  // an export of fewer cases into the same folder left the extra ones behind. No other file
  // of the folder is touched.
  std::vector<fs::path> previous;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string f = e.path().filename().string();
    std::error_code rec;
    // Decimal without a leading zero, as std::to_string writes it (case007 is not one of ours).
    if (f.size() > 16 && f.rfind("case", 0) == 0 && f.ends_with(".safetensors") &&
        std::all_of(f.begin() + 4, f.end() - 12, [](char ch) { return ch >= '0' && ch <= '9'; }) &&
        (f[4] != '0' || f.size() == 17) && e.is_regular_file(rec))
      previous.push_back(e.path());
  }
  for (const fs::path& f : previous) {
    std::error_code rec;
    if (!fs::remove(f, rec)) {
      std::cerr << "tf-cuda-test: error: export: --out " << f.string() << ": cannot remove the previous export's file\n";
      return 2;
    }
  }
  nlohmann::json manifest;
  manifest["schema"] = "kernel-contracts/export/1";
  manifest["contract"] = contract;
  manifest["backend"] = be.name();
  manifest["device"] = be.device().name;
  manifest["seed"] = seed;
  // The head of the oracle's receipt: this build's git provenance, the device, our argv.
  manifest["receipt_head"] = Receipt(Receipt::Head{"contract", "oracle", be.name(), device_json(be.device()), argv, seed}).doc();
  manifest["cases"] = nlohmann::json::array();
  const auto list = export_cases(cases);
  for (size_t i = 0; i < list.size(); ++i) {
    const ExportCase& c = list[i];
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + i);
    const KvLayout lay(1, c.kv_heads, c.d, c.fmt);
    Cache cache;
    Status st = engine::make_engine_cache(lay, {{c.len, c.page}}, &cache);
    std::vector<float> q, k, v;
    fill_rows(rng, q, c.queries * c.q_heads, c.d, false);
    fill_rows(rng, k, c.len * c.kv_heads, c.d, false);
    fill_rows(rng, v, c.len * c.kv_heads, c.d, true);
    // Positions 0..len-1; the last `queries` rows also bring a query (one launch each part).
    const int first_q = c.len - c.queries;
    std::vector<RopeRow> rows(c.len);
    for (int p = 0; p < c.len; ++p) rows[p] = {0, c.pos_offset + p, p};
    std::vector<float> q_out(size_t(c.queries) * c.q_heads * c.d);
    const RopeParams rp{c.q_heads, c.rot, c.base, 0};
    const size_t row_floats = size_t(c.kv_heads) * c.d;
    if (st.ok && first_q > 0)
      st = be.rope_store(cache, rp, rows.data(), first_q, nullptr, k.data(), v.data(), nullptr);
    if (st.ok)
      st = be.rope_store(cache, rp, rows.data() + first_q, c.queries, q.data(), k.data() + first_q * row_floats,
                         v.data() + first_q * row_floats, q_out.data());
    std::vector<AttnRow> arows(c.queries);
    for (int r = 0; r < c.queries; ++r) arows[r] = {0, first_q + r + 1, 0, 0};
    std::vector<float> o(q_out.size());
    const AttnParams ap{c.q_heads, 0, c.chunk, c.scale};
    if (st.ok) st = be.attention(cache, ap, arows.data(), c.queries, {}, q_out.data(), o.data());
    if (!st.ok) {
      std::cerr << "tf-cuda-test: error: export: " << case_line(int(i), c) << ": " << st.message << "\n";
      return 1;
    }
    // The cache's rows as stored: bf16 rows as BF16 (exact), fp8 codes as F32 integers 0..255
    // (the oracle decodes them with PyTorch) and the row scales as F32.
    const KvView view = cache.view(0);
    std::vector<float> kc_rows(size_t(c.len) * row_floats), vc_rows(kc_rows.size());
    std::vector<float> ks(size_t(c.len) * c.kv_heads), vs(ks.size());
    for (int p = 0; p < c.len; ++p)
      for (int h = 0; h < c.kv_heads; ++h)
        for (int kv = 0; kv < 2; ++kv) {
          const uint8_t* src = kv_row(view, 0, kv, h, p);
          float* dst = (kv == 0 ? kc_rows : vc_rows).data() + (size_t(p) * c.kv_heads + h) * c.d;
          if (c.fmt == Format::bf16) {
            for (int j = 0; j < c.d; ++j) {
              uint16_t b;
              std::memcpy(&b, src + 2 * j, 2);
              const uint32_t u = uint32_t(b) << 16;
              std::memcpy(dst + j, &u, 4);
            }
          } else {
            for (int j = 0; j < c.d; ++j) dst[j] = float(src[j]);
            float s;
            std::memcpy(&s, kv_scale(view, 0, kv, h, p), 4);
            (kv == 0 ? ks : vs)[size_t(p) * c.kv_heads + h] = s;
          }
        }
    const int64_t L = c.len, Q = c.queries, QH = c.q_heads, KH = c.kv_heads, D = c.d;
    std::vector<TensorToWrite> t;
    t.push_back({"q", Dtype::f32, {Q, QH, D}, q, {}});
    t.push_back({"k", Dtype::f32, {L, KH, D}, k, {}});
    t.push_back({"v", Dtype::f32, {L, KH, D}, v, {}});
    t.push_back({"q_rot", Dtype::f32, {Q, QH, D}, q_out, {}});
    t.push_back({"out", Dtype::f32, {Q, QH, D}, o, {}});
    if (c.fmt == Format::bf16) {
      t.push_back({"k_cache", Dtype::bf16, {L, KH, D}, kc_rows, {}});
      t.push_back({"v_cache", Dtype::bf16, {L, KH, D}, vc_rows, {}});
    } else {
      t.push_back({"k_codes", Dtype::f32, {L, KH, D}, kc_rows, {}});
      t.push_back({"v_codes", Dtype::f32, {L, KH, D}, vc_rows, {}});
      t.push_back({"k_scale", Dtype::f32, {L, KH}, ks, {}});
      t.push_back({"v_scale", Dtype::f32, {L, KH}, vs, {}});
    }
    const std::string file = "case" + std::to_string(i) + ".safetensors";
    st = engine::write_safetensors((fs::path(out_dir) / file).string(), t);
    if (!st.ok) {
      std::cerr << "tf-cuda-test: error: export: " << st.message << "\n";
      return 2;
    }
    nlohmann::json m = {{"case", case_line(int(i), c)}, {"file", file},      {"head_dim", c.d},
                        {"q_heads", c.q_heads},        {"kv_heads", c.kv_heads}, {"rot_dims", c.rot},
                        {"rope_base", c.base},         {"len", c.len},         {"queries", c.queries},
                        {"first_query_pos", first_q},  {"pos_offset", c.pos_offset},  {"format", format_name(c.fmt)}, {"page", c.page},
                        {"chunk", c.chunk},            {"scale", c.scale},
                        {"arith", be.attention_arith(c.fmt, c.d) == AttnArith::mma_split ? "mma_split" : "fma_chain"}};
    manifest["cases"].push_back(m);
  }
  const Status ws = write_text_atomic(mpath, manifest.dump(1) + "\n");
  if (!ws.ok) {
    std::cerr << "tf-cuda-test: error: export: " << ws.message << "\n";
    return 2;
  }
  std::cout << "export: " << list.size() << " cases of " << contract << " on " << be.name() << " -> " << out_dir
            << " (check with: python3 tools/oracle_torch.py " << shell_quote(out_dir) << ")\n";
  return 0;
}

}  // namespace kc
