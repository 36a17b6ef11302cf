// `tf-cuda-test bench pack`: the scale-plane packing kernels (gather = pack, scatter =
// unpack) on the device against a device-to-device copy ceiling measured in the same run
// over the same byte count. Blob sizes 16 MiB .. 1 GiB, pages of 16 and 256 positions
// and a window, bf16 and fp8. Rates count bytes read plus bytes written, for the kernels
// and the ceiling alike. Target (the issue's): achieved / ceiling >= 0.70 for blobs of
// 64 MiB and more, pack and unpack, every addressing and format; met or not per row.
#include "tools/bench_pack.h"

#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "bench/pack.h"
#include "contracts/framework.h"

namespace kc {

int bench_pack_main(const BenchOptions& o, Receipt* receipt) {
  const auto t_start = std::chrono::steady_clock::now();  // the receipt's timings.total_s
  // Shape: 4 layers, 8 KV heads, head_dim 128 (a position is 16 KiB in bf16, 8,448 bytes
  // in fp8: 64 code planes and 64 scale planes).
  const int layers = 4, kv_heads = 8, head_dim = 128;
  const std::vector<uint64_t> sizes_mib = o.quick ? std::vector<uint64_t>{16, 64} : std::vector<uint64_t>{16, 64, 256, 1024};
  const std::vector<int> addrs = {16, 256, 0};
  constexpr double kTarget = 0.70;
  constexpr uint64_t kTargetFromMib = 64;
  const int warmup = 3;
  Receipt r(Receipt::Head{"bench", "pack", "cuda", o.device, o.argv, nullptr});  // no generator: seed null
  r["quick"] = o.quick;  // the mode premerge times a head in (argv may be premerge's own)
  r["shape"] = {{"layers", layers}, {"kv_heads", kv_heads}, {"head_dim", head_dim}};
  r["method"] = "CUDA events around single launches, warm-up " + std::to_string(warmup) + ", median of " +
                std::to_string(o.reps) +
                " runs; pack = gather of every declared field (codes and scales) of a lane into the blob's device data "
                "region, unpack = scatter back into another cache; ceiling = grid-stride int4 (16-byte) load/store copy "
                "kernel over the blob's data bytes, same run; all rates are (bytes read + bytes written) / time; each "
                "row verified untimed: the packed data equals a host walk of the source cache (field by field, position by "
                "position, through kv_field_row), and the other cache after unpack holds the source's bytes in every "
                "field row";
  nlohmann::json rows = nlohmann::json::array(), targets = nlohmann::json::array();
  bool all = true;
  std::cout << std::left << std::setw(8) << "blob" << std::setw(6) << "fmt" << std::setw(8) << "addr" << std::setw(11)
            << "pack us" << std::setw(11) << "unpack us" << std::setw(11) << "copy us" << std::setw(12) << "ceil TB/s"
            << std::setw(10) << "pack/ceil" << std::setw(12) << "unpack/ceil" << "verified\n";
  for (uint64_t mib : sizes_mib)
    for (Format f : {Format::bf16, Format::fp8})
      for (int a : addrs) {
        PackBenchResult res;
        const Status st = bench_pack_config({f, a, mib << 20, layers, kv_heads, head_dim}, warmup, o.reps, &res);
        const std::string addr = a ? "p" + std::to_string(a) : "window";
        const std::string cfg = std::to_string(mib) + "MiB/" + format_name(f) + "/" + addr;
        if (!st.ok) {
          std::cerr << "tf-cuda-test: error: bench pack " << cfg << ": " << st.message << "\n";
          if (rows.empty()) return 2;
          // The row's names as a timed row has them: diff and premerge match it to its base row
          // (a failed row once read as a row removed).
          rows.push_back({{"config", cfg}, {"format", format_name(f)}, {"addressing", addr}, {"error", st.message}});
          all = false;
          continue;
        }
        const double moved = 2.0 * res.data_bytes;  // read + write
        const double ceiling = 2.0 * res.copy_bytes / (res.copy_us * 1e-6);
        const double pack_bps = moved / (res.pack_us * 1e-6), unpack_bps = moved / (res.unpack_us * 1e-6);
        nlohmann::json row = {{"config", cfg}, {"blob_mib", mib}, {"format", format_name(f)}, {"addressing", addr},
                              {"positions", res.count}, {"data_bytes", res.data_bytes},
                              {"pack_us", res.pack_us}, {"unpack_us", res.unpack_us},
                              {"ceiling_copy_bytes", res.copy_bytes}, {"ceiling_copy_us", res.copy_us},
                              {"pack_bytes_per_s", pack_bps}, {"unpack_bytes_per_s", unpack_bps},
                              {"ceiling_bytes_per_s", ceiling}, {"pack_of_ceiling", pack_bps / ceiling},
                              {"unpack_of_ceiling", unpack_bps / ceiling}, {"verified", res.verified},
                              {"verification", {{"detail", res.verify_detail}}}};  // an object: not a row name
        rows.push_back(row);
        if (!res.verified) {
          all = false;
          std::cerr << "bench pack " << cfg << ": NOT verified: " << res.verify_detail << "\n";
        }
        std::cout << std::left << std::setw(8) << (std::to_string(mib) + "M") << std::setw(6) << format_name(f)
                  << std::setw(8) << addr << std::setprecision(4) << std::setw(11) << res.pack_us << std::setw(11)
                  << res.unpack_us << std::setw(11) << res.copy_us << std::setw(12) << ceiling / 1e12 << std::setw(10)
                  << pack_bps / ceiling << std::setw(12) << unpack_bps / ceiling << (res.verified ? "yes" : "NO")
                  << "\n";
        if (mib >= kTargetFromMib)
          for (const char* op : {"pack", "unpack"}) {
            const double v = (std::string(op) == "pack" ? pack_bps : unpack_bps) / ceiling;
            const bool met = res.verified && v >= kTarget;
            all = all && met;
            targets.push_back({{"name", cfg + " " + op + ": achieved / ceiling"}, {"value", v}, {"limit", kTarget},
                               {"at_least", true}, {"met", met}, {"measured", res.verified}});  // unverified: the rate does not stand
          }
      }
  r["rows"] = rows;
  r["targets"] = targets;
  r["target"] = {{"name", "pack and unpack: at least 0.70 of the copy ceiling at 64 MiB and more"},
                 {"limit", kTarget}, {"from_mib", kTargetFromMib}, {"met", all}};
  std::vector<std::string> why;  // the receipt's verdict_reasons: each row below the target
  for (auto& row : rows)  // rows that carry no target (an error, an unverified row under 64 MiB) still say why
    if (row.contains("error"))
      why.push_back("row " + row["config"].get<std::string>() + ": " + row["error"].get<std::string>());
    else if (row.contains("verified") && !row["verified"].get<bool>() && row.value("blob_mib", uint64_t(0)) < kTargetFromMib)
      why.push_back("row " + row["config"].get<std::string>() + ": not verified: " +
                    row["verification"]["detail"].get<std::string>());
  const size_t row_reasons = why.size();
  for (auto& tg : targets)
    if (!tg["met"].get<bool>()) {
      std::ostringstream w;
      const double v = tg["value"].get<double>();
      w << "row " << tg["name"].get<std::string>() << ": " << std::setprecision(3) << v;
      if (v < kTarget) w << " < " << kTarget;
      else w << ", its bytes not verified";
      why.push_back(w.str());
    }
  const size_t missed = why.size() - row_reasons;
  std::cout << "\ntarget: achieved / ceiling >= " << kTarget << " at " << kTargetFromMib << " MiB and more: "
            << (all ? "met" : "NOT met") << " (" << targets.size() - missed << " of " << targets.size()
            << " rows meet it)\n";
  r.set_verdict(all, why);
  r.set_total_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  *receipt = std::move(r);
  return all ? 0 : 1;
}

}  // namespace kc
