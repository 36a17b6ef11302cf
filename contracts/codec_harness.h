// The case skeleton and the common controls of the row codec contracts (fp8-rows, q4-rows,
// mxfp4-rows).
//
// A case encodes every (layer, K/V, head) row of two lanes, shuffled into one launch,
// into a paged cache (pages shuffled through an arena) and into a window cache, then
// decodes both. The harness runs the gates every codec has:
//   inputs             inputs hash the same after each launch
//   repeats            three encodes and three decodes give identical bytes
//   rows==solo         a row encoded alone equals the same row in the mixed launch (the
//                      launch's first and last rows, then three at random)
//   paged==window      rows written through a page table equal rows written to a window,
//                      bytes; decoded rows equal too
//   guards             no byte outside the rows written changed; output canaries intact
//   device==host-twin  (cuda) device bytes and decoded values equal the host twin's
// and the controls every codec has (swapped page table, planted row, stray write, and the
// backend-boundary faults of contracts/faulty_backend.h). A contract plugs in its backend
// calls, its case generator's edges, its row values, its reference gates (CodecChecks)
// and its own controls.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "contracts/arena.h"
#include "contracts/framework.h"

namespace kc {

// One generated case. Its vars() line is its log line, receipt key and filter.
struct CodecCase {
  const char* contract;  // "fp8-rows", ...: the vars() prefix
  const int ptok;
  const int head_dim;
  const int layers;
  const int kv_heads;
  const int len0;
  const int len1;
  const std::string dist;  // value distribution of the rows (the contract's make_rows)
  const uint64_t seed;
  std::string vars() const;
};

// How a contract draws its cases: the first cases take the fixed values, the rest are
// drawn (pages 1, 3, 7, 16, 48, 512 or any size to 700; L 1 or 2; H 1, 2 or 4; lengths 1,
// a page minus one, a page, a page plus one, two pages plus one, or random).
struct CaseDraw {
  std::vector<int> fixed_ptok;
  std::vector<int> head_dims;  // drawn from these
  std::vector<int> fixed_d;    // may be shorter than fixed_ptok (or empty)
  int max_len;                 // a random length is 1..max_len
  int lane_rows;               // a lane's length is capped at lane_rows / (2 L H)
  std::vector<const char*> dists;        // drawn from these
  std::vector<const char*> fixed_dists;  // of the first cases
};

// Every (layer, K/V, head) row of a case's two lanes, its inputs and its two caches.
struct CaseRows {
  CaseRows(const CodecCase& c, Format format,
           const std::function<std::vector<float>(const CodecCase&, size_t)>& make_rows);
  const CodecCase& c;
  const std::string cv;  // c.vars()
  const KvLayout lay;
  const std::vector<int> lens;
  const int d;
  std::mt19937_64 g;          // shuffles the rows, then picks rows==solo and planted rows
  std::vector<RowRef> rows;   // both lanes, shuffled: one launch mixes them in any order
  std::vector<float> x;       // [rows][d]
  Cache paged;
  Cache window;
  int n() const { return int(rows.size()); }
  const float* row_x(int i) const { return x.data() + size_t(i) * d; }
};

// The format-specific gates of a case (and the plants of a contract's own controls).
class CodecChecks {
 public:
  virtual ~CodecChecks() = default;
  // A control's plant on the written caches, after the encode gates.
  virtual void plant_written(CaseRows&) {}
  // Gates on the written bytes against the reference (between paged==window and guards).
  virtual void check_bytes(Run& run, const CaseRows& cr) = 0;
  // A control's plant on the caches just before the decode.
  virtual void plant_decode(CaseRows&) {}
  // Gates on the rows decoded from the paged cache, `out` [n][d].
  virtual void check_values(Run& run, const CaseRows& cr, const float* out) = 0;
};

using MakeChecks = std::function<std::unique_ptr<CodecChecks>(const CaseRows&)>;

// A contract's own control: two cases of the control shape, pages ptoks[k], seeds
// seed_base + ptoks[k], checked by `checks` (which plants the defect).
struct CodecControl {
  std::string name;
  std::string description;
  std::vector<int> ptoks;
  const char* dist;
  int seed_base;
  MakeChecks checks;
};

// Everything that differs between the row codec contracts.
struct RowCodec {
  const char* name;
  Format format;
  CaseDraw draw;
  int control_head_dim;  // the controls' cases: L 1, H 2, lengths 3 ptok + 1 and 2 ptok
  std::function<std::vector<float>(const CodecCase&, size_t)> make_rows;
  MakeChecks checks;     // the unplanted gates
  // Declared between paged==window and repeats, in this order.
  std::vector<std::pair<std::string, std::string>> reference_gates;
  std::string guards_description;
  std::string planted_row_description;
  std::vector<CodecControl> own_controls;  // run between planted-row and stray-write
  int stray_seed_base;
  // Declares its once-per-run gates (after the case gates) and runs them.
  std::function<void(Run&)> once_per_run;
};

CodecCase draw_codec_case(const RowCodec& codec, uint64_t seed, int index);

// The controls (the contract first proves it can fail), the gate declarations, the
// once-per-run checks, then run.cases drawn cases.
void run_codec_contract(Run& run, const RowCodec& codec);

// Helpers for the contracts' own gates.
bool same_float(float a, float b);  // bits equal, or both NaN
std::string row_name(const RowRef& r);
// Bytes of a row (codes then scales) as read through the cache's own view.
std::vector<uint8_t> row_bytes(const Cache& c, const RowRef& r);

// decode==reference (bits; NaN by predicate) and the bound gate `bound_gate` over the
// decoded rows: want(i) is row i's reference (.values, .bound), poisoned(want, j) says
// that element j must decode to NaN. Returns the worst ratio.
template <class Want, class Poisoned>
double check_decoded(Run& run, const CaseRows& cr, const float* out, const std::string& bound_gate, Want want,
                     Poisoned poisoned) {
  double worst = 0;
  std::string worst_at;
  int64_t bad_val = 0;
  std::string first_val;
  for (int i = 0; i < cr.n(); ++i) {
    const float* xr = cr.row_x(i);
    const auto& w = want(i);
    const float* got = out + size_t(i) * cr.d;
    for (int j = 0; j < cr.d; ++j) {
      if (!same_float(got[j], w.values[j]) && bad_val++ == 0)
        first_val = row_name(cr.rows[i]) + "[" + std::to_string(j) + "]";
      double ratio;
      if (poisoned(w, j)) ratio = std::isnan(got[j]) ? 0.0 : std::numeric_limits<double>::infinity();
      else if (std::isnan(got[j])) ratio = std::numeric_limits<double>::quiet_NaN();
      else ratio = std::fabs(double(got[j]) - double(xr[j])) / w.bound[j];
      if (worse_ratio(ratio, worst)) {
        worst = ratio;
        std::ostringstream o;
        o << row_name(cr.rows[i]) << "[" << j << "] x=" << xr[j] << " got=" << got[j] << " bound=" << w.bound[j];
        worst_at = o.str();
        if (std::isnan(ratio)) break;
      }
    }
  }
  run.check("decode==reference", bad_val == 0, cr.cv, std::to_string(bad_val) + " values differ, first " + first_val);
  run.check_ratio(bound_gate, worst, cr.cv, worst_at);
  return worst;
}

}  // namespace kc
