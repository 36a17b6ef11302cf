// `tf-cuda-test bench attention`: split-K partial + merge on the device against a read
// bandwidth ceiling measured in the same run and PyTorch SDPA (tools/bench_sdpa.py) on
// the same dense shapes; prints a table and writes a receipt with the issue's targets,
// each reported as met or not.
#include "tools/bench_attention.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "bench/attention.h"
#include "contracts/framework.h"
#include "contracts/receipt.h"  // shell_quote
#include "tools/scratch_dir.h"

namespace kc {

namespace {
struct Shape {
  int hq, hkv, d;
};
std::string key(const Shape& s, int b, int ctx) {
  std::ostringstream o;
  o << s.hq << "q/" << s.hkv << "kv/d" << s.d << "/b" << b << "/ctx" << ctx;
  return o.str();
}
}  // namespace

nlohmann::json bench_target(const std::string& name, double value, double limit, bool at_least) {
  const bool measured = value > 0;
  return {{"name", name}, {"value", value}, {"limit", limit}, {"at_least", at_least},
          {"met", measured && (at_least ? value >= limit : value <= limit)}, {"measured", measured}};
}

int bench_attention_main(const BenchOptions& o, Receipt* receipt) {
  const auto t_start = std::chrono::steady_clock::now();  // the receipt's timings.total_s
  const std::vector<Shape> shapes = {{24, 4, 256}, {32, 8, 128}};
  const std::vector<int> batches = o.quick ? std::vector<int>{1, 8} : std::vector<int>{1, 8, 32};
  const std::vector<int> ctxs = o.quick ? std::vector<int>{4096, 32768} : std::vector<int>{4096, 32768, 131072};
  const std::vector<int> addrs = {0, 16, 256};
  const std::vector<Format> formats = {Format::bf16, Format::fp8, Format::q4};
  const std::regex filter(o.filter, std::regex::ECMAScript);  // checked by the command line
  auto row_name = [](const std::string& k, Format f, int a) {
    return k + "/" + format_name(f) + "/" + (a ? "p" + std::to_string(a) : std::string("window"));
  };
  auto wanted = [&](const std::string& k) {  // any row of this dense config selected
    for (Format f : formats)
      for (int a : addrs)
        if (kc::filter_search(row_name(k, f, a), filter, o.filter)) return true;
    return false;
  };
  Receipt r(Receipt::Head{"bench", "attention", "cuda", o.device, o.argv, nullptr});  // no generator: seed null
  if (!o.filter.empty()) r["filter"] = o.filter;
  r["quick"] = o.quick;  // the mode premerge times a head in (argv may be premerge's own)
  r["chunk"] = o.chunk;
  r["timing"] = o.timing;
  const std::string timed = o.timing == "events"  ? "CUDA events around partial+merge"
                            : o.timing == "gated" ? "CUDA events around partial+merge enqueued behind a gate kernel "
                                                    "(device time; the host's enqueue outside)"
                            : o.timing == "graph" ? "CUDA events around a CUDA graph of partial+merge"
                                                  : "CUDA events around the partial alone, gated (device time)";
  r["method"] = timed + ", warm-up 3, median of " + std::to_string(o.reps) +
                " runs, caches rotated through min(16, 512 MiB / cache bytes) copies, at least one (more than the L2 for every row); ceiling: read-only int4 (16-byte) __ldcs kernel over 4 GiB";
  double ceiling = 0;
  Status st = bench_read_ceiling(size_t(4) << 30, 10, &ceiling);
  if (!st.ok) {
    std::cerr << "tf-cuda-test: error: " << st.message << "\n";
    return 2;
  }
  r["ceiling_bytes_per_s"] = ceiling;
  std::cerr << "read ceiling: " << ceiling / 1e12 << " TB/s\n";
  // The launch floor in the same timing: an empty kernel then an empty dependent one (the
  // partial + merge launch pattern without work).
  double floor_us = 0;
  st = bench_launch_floor(o.timing, o.reps, &floor_us);
  if (!st.ok) {
    std::cerr << "tf-cuda-test: error: " << st.message << "\n";
    return 1;
  }
  r["launch_floor_us"] = floor_us;
  std::cerr << "launch floor (" << o.timing << "): " << floor_us << " us\n";

  // SDPA on the dense bf16 shapes (--sdpa none: not run, and the receipt says so).
  std::map<std::string, nlohmann::json> sdpa;
  if (o.sdpa == "none") {
    r["sdpa"] = {{"not_measured", "--sdpa none"}};
  } else {
    nlohmann::json cfgs = nlohmann::json::array();
    for (const Shape& s : shapes)
      for (int b : batches)
        for (int ctx : ctxs)
          if (wanted(key(s, b, ctx))) cfgs.push_back({{"q_heads", s.hq}, {"kv_heads", s.hkv}, {"head_dim", s.d}, {"batch", b}, {"ctx", ctx}});
    // The configurations and SDPA's times go through a folder of this process's own (two runs
    // at once do not share files), removed afterwards; a failed write, run or parse leaves SDPA
    // "not measured" with the reason, never an abort.
    namespace fs = std::filesystem;
    const ScratchDir scratch("kc-bench-sdpa");
    const fs::path& tmp = scratch.path();
    const std::string in = (tmp / "in.json").string(), out = (tmp / "out.json").string();
    // Each word quoted: a --script-dir or $TMPDIR with a space split the command ("failed (rc ..)").
    const std::string cmd = shell_quote(o.sdpa) + " " + shell_quote(o.script_dir + "/bench_sdpa.py") + " " +
                            shell_quote(in) + " " + shell_quote(out);
    std::string err;
    {
      std::ofstream f(in);
      f << cfgs.dump();
      f.close();
      if (!scratch.ok() || !f) err = "could not write " + in;
    }
    int rc = 0;
    if (err.empty()) {
      rc = std::system(cmd.c_str());
      if (rc != 0 || !fs::exists(out)) err = "`" + cmd + "` failed (rc " + std::to_string(rc) + ")";
    }
    if (err.empty()) {
      try {
        nlohmann::json j = nlohmann::json::parse(std::ifstream(out));
        std::map<std::string, nlohmann::json> got;
        for (auto& row : j.at("rows"))
          got[key({row.at("q_heads").get<int>(), row.at("kv_heads").get<int>(), row.at("head_dim").get<int>()},
                  row.at("batch").get<int>(), row.at("ctx").get<int>())] = row;
        r["sdpa"] = {{"torch", j.at("torch")}, {"device", j.at("device")}};
        sdpa = std::move(got);
      } catch (const nlohmann::json::exception& e) {
        err = "`" + cmd + "` wrote an unreadable result (" + e.what() + ")";
      }
    }
    if (!err.empty()) r["sdpa"] = {{"error", err}};
  }

  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, double> t;  // key/fmt/addr -> us
  std::cout << std::left << std::setw(30) << "config" << std::setw(6) << "fmt" << std::setw(7) << "addr" << std::setw(11)
            << "ours us" << std::setw(10) << "of ceil" << std::setw(12) << "sdpa best" << "ours/sdpa\n";
  for (const Shape& s : shapes)
    for (int b : batches)
      for (int ctx : ctxs)
        for (Format f : formats)
          for (int a : addrs) {
            if (!filter_search(row_name(key(s, b, ctx), f, a), filter, o.filter)) continue;
            AttnBenchResult res;
            st = bench_attention_config({s.hq, s.hkv, s.d, b, ctx, f, a, o.chunk, o.timing}, 3, o.reps, &res);
            const std::string k = key(s, b, ctx);
            const std::string addr = a ? "p" + std::to_string(a) : "window";
            if (!st.ok) {
              // As the other benches: nothing timed yet is a device that cannot run the bench
              // (exit 2, no receipt); later, the row is kept with its error, the verdict fails
              // naming it, and the rows timed before it still reach the receipt.
              std::cerr << "tf-cuda-test: error: bench attention " << row_name(k, f, a) << ": " << st.message << "\n";
              if (rows.empty()) return 2;
              rows.push_back({{"config", k}, {"format", format_name(f)}, {"addressing", addr}, {"error", st.message}});
              continue;
            }
            t[k + "/" + format_name(f) + "/" + addr] = res.median_us;
            nlohmann::json row = {{"config", k}, {"format", format_name(f)}, {"addressing", addr},
                                  {"median_us", res.median_us}, {"bytes", res.bytes},
                                  {"bytes_per_s", res.bytes / (res.median_us * 1e-6)},
                                  {"of_ceiling", res.bytes / (res.median_us * 1e-6) / ceiling}};
            if (res.host_enqueue_us > 0) row["host_enqueue_us"] = res.host_enqueue_us;
            if (!res.out_fnv1a.empty()) row["out_fnv1a"] = res.out_fnv1a;
            row["kernel_paths"] = res.kernel_paths;  // an array: names no row (row_key reads strings)
            double best = 0;
            if (sdpa.count(k)) {
              for (const char* n : {"flash_us", "cudnn_us"})
                if (sdpa[k][n].is_number() && (best == 0 || sdpa[k][n].get<double>() < best)) best = sdpa[k][n];
              row["sdpa_flash_us"] = sdpa[k]["flash_us"];
              row["sdpa_cudnn_us"] = sdpa[k]["cudnn_us"];
              if (best > 0) row["ours_over_sdpa_best"] = res.median_us / best;
            }
            rows.push_back(row);
            std::cout << std::left << std::setw(30) << k << std::setw(6) << format_name(f) << std::setw(7) << addr
                      << std::setw(11) << std::setprecision(4) << res.median_us << std::setw(10)
                      << row["of_ceiling"].get<double>() << std::setw(12) << best << (best > 0 ? res.median_us / best : 0)
                      << "\n";
          }
  r["rows"] = rows;
  // Targets of the issue, each met or not (measured above, same run).
  const std::string k8 = key(shapes[0], 8, 32768), k1 = key(shapes[0], 1, 32768);
  auto get = [&](const std::string& k) { return t.count(k) ? t[k] : 0.0; };
  auto sdpa_best = [&](const std::string& k) {
    double best = 0;
    if (sdpa.count(k))
      for (const char* n : {"flash_us", "cudnn_us"})
        if (sdpa[k][n].is_number() && (best == 0 || sdpa[k][n].get<double>() < best)) best = sdpa[k][n];
    return best;
  };
  nlohmann::json targets = nlohmann::json::array();
  auto target = [&](const std::string& name, double value, double limit, bool at_least) {
    targets.push_back(bench_target(name, value, limit, at_least));
  };
  const double w8 = get(k8 + "/bf16/window");
  // bf16 window achieved / ceiling of one configuration (0 when it was not timed).
  auto bf16_of_ceiling = [&](const std::string& k) {
    for (const auto& row : rows)
      if (row["config"] == k && row["format"] == "bf16" && row["addressing"] == "window" && !row.contains("error"))
        return row["of_ceiling"].get<double>();
    return 0.0;
  };
  target("bf16 window 32K x b8: achieved / ceiling", bf16_of_ceiling(k8), 0.80, true);
  target("bf16 window 32K x b8: ours / SDPA best", sdpa_best(k8) > 0 ? w8 / sdpa_best(k8) : 0, 1.10, false);
  target("bf16 window 32K x b1: ours / SDPA best", sdpa_best(k1) > 0 ? get(k1 + "/bf16/window") / sdpa_best(k1) : 0, 1.0, false);
  target("bf16 32K x b8: paged(256) / window", w8 > 0 ? get(k8 + "/bf16/p256") / w8 : 0, 1.05, false);
  target("bf16 32K x b8: paged(16) / window", w8 > 0 ? get(k8 + "/bf16/p16") / w8 : 0, 1.15, false);
  target("32K x b8 window: fp8 / bf16", w8 > 0 ? get(k8 + "/fp8/window") / w8 : 0, 0.65, false);
  // q4 (Hadamard 4-bit, on the tensor cores at head_dim 128 / 256) against bf16, both
  // shapes (issue 20: <= 0.40; a q4 row is 0.28 of a bf16 row's bytes at d 256).
  for (const Shape& sh : shapes) {
    const std::string k = key(sh, 8, 32768);
    const double b = get(k + "/bf16/window");
    target("32K x b8 window d" + std::to_string(sh.d) + ": q4 / bf16", b > 0 ? get(k + "/q4/window") / b : 0, 0.40,
           false);
  }
  r["targets"] = targets;
  // Reported, no target: q4 against bf16 at b1.
  const double q4r = w8 > 0 ? get(k8 + "/q4/window") / w8 : 0;
  const double q4r1 = get(k1 + "/bf16/window") > 0 ? get(k1 + "/q4/window") / get(k1 + "/bf16/window") : 0;
  r["ratios"] = {{"32K x b8 window: q4 / bf16", q4r}, {"32K x b1 window: q4 / bf16", q4r1}};
  // Reported, the issue-20 levels they are measured against named (not targets yet: a new
  // unmet target would make premerge fail against every base receipt made before it).
  std::vector<std::pair<std::string, double>> issue20;
  double worst_sdpa = 0;
  for (const auto& row : rows)
    if (row["format"] == "bf16" && row.contains("ours_over_sdpa_best") && row["ours_over_sdpa_best"].is_number() &&
        row["config"].get<std::string>().find("/ctx4096") == std::string::npos)
      worst_sdpa = std::max(worst_sdpa, row["ours_over_sdpa_best"].get<double>());
  issue20.push_back({"bf16, context >= 32K: worst ours / SDPA best (issue 20: <= 1.0)", worst_sdpa});
  for (const Shape& sh : shapes) {
    const std::string d = "d" + std::to_string(sh.d), k = key(sh, 8, 32768), k4 = key(sh, 1, 4096);
    const double b = get(k + "/bf16/window");
    issue20.push_back({"bf16 window 32K x b8 " + d + ": achieved / ceiling (issue 20: >= 0.90)", bf16_of_ceiling(k)});
    issue20.push_back({"32K x b8 window " + d + ": fp8 / bf16 (issue 20: <= 0.60)", b > 0 ? get(k + "/fp8/window") / b : 0});
    double slowest = 0;
    for (const char* f : {"bf16", "fp8", "q4"}) slowest = std::max(slowest, get(k4 + "/" + f + "/window"));
    issue20.push_back({"b1 x 4K window " + d + ": slowest format, us (issue 20: <= 15)", slowest});
  }
  for (const auto& [name, v] : issue20)
    if (v > 0) r["ratios"][name] = v;
  bool all = true;
  std::vector<std::string> why;  // the receipt's verdict_reasons: each target not met
  std::cout << "\ntargets (shape 24q/4kv/d256 unless named):\n";
  for (auto& tg : targets) {
    const bool met = tg["met"].get<bool>(), measured = tg["measured"].get<bool>(), at_least = tg["at_least"].get<bool>();
    const std::string name = tg["name"].get<std::string>();
    const double value = tg["value"].get<double>(), limit = tg["limit"].get<double>();
    all = all && met;
    std::cout << "  " << std::left << std::setw(46) << name << std::setw(10) << std::setprecision(3) << value
              << (at_least ? ">= " : "<= ") << limit << "  " << (met ? "met" : (measured ? "NOT met" : "not measured")) << "\n";
    if (!met) {
      std::ostringstream w;
      w << "target " << name << ": ";
      if (measured) w << std::setprecision(3) << value << (at_least ? " < " : " > ") << limit;
      else w << "not measured";
      why.push_back(w.str());
    }
  }
  for (const auto& row : rows)  // rows that erred carry no time; the verdict names them
    if (row.contains("error")) {
      all = false;
      why.push_back("row " + row["config"].get<std::string>() + "/" + row["format"].get<std::string>() + "/" +
                    row["addressing"].get<std::string>() + ": " + row["error"].get<std::string>());
    }
  std::cout << "reported (no target): 32K x b8 window q4 / bf16 " << std::setprecision(3) << q4r
            << ", 32K x b1 window q4 / bf16 " << q4r1 << "\n";
  for (const auto& [name, v] : issue20)
    if (v > 0) std::cout << "reported (no target): " << name << " " << std::setprecision(3) << v << "\n";
  r.set_verdict(all, why);
  r.set_total_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  *receipt = std::move(r);
  return all ? 0 : 1;
}

}  // namespace kc
