#!/usr/bin/env python3
"""Summary of chunk.sh: every bench attention row at each chunk (median us per run), the ratio of the
chunk-1024 runs to the chunk-512 runs (mean of each chunk's runs), and issue 20's attention targets
computed from each chunk's runs (SDPA's times from the one run that timed them).
Usage: chunk_summary.py DIR (the bench-c<W>-r<k>.json receipts)."""
import glob, json, os, re, statistics, sys

d = sys.argv[1]
runs = {}  # chunk -> [receipt]
for f in sorted(glob.glob(os.path.join(d, "bench-c*-r*.json"))):
    m = re.search(r"bench-c(\d+)-r(\d+)\.json$", f)
    try:
        runs.setdefault(int(m.group(1)), []).append(json.load(open(f)))
    except (OSError, ValueError) as e:
        print(f"unreadable {f}: {e}")
if 512 not in runs:
    sys.exit("no chunk-512 run")

def rows(r):
    return {(x["config"], x["format"], x["addressing"]): x for x in r["rows"] if "median_us" in x}

sdpa = {}
for r in runs[512]:
    for k, x in rows(r).items():
        b = [x[s] for s in ("sdpa_cudnn_us", "sdpa_flash_us") if x.get(s)]
        if b and k not in sdpa:
            sdpa[k] = min(b)

def us(c):
    """row -> mean of the chunk's runs' medians, and the runs' hashes."""
    out, hashes = {}, {}
    for r in runs[c]:
        for k, x in rows(r).items():
            out.setdefault(k, []).append(x["median_us"])
            hashes.setdefault(k, set()).add(x.get("out_fnv1a"))
    return {k: statistics.mean(v) for k, v in out.items()}, hashes

print("device:", runs[512][0].get("device", {}).get("name", runs[512][0].get("device")))
for c in sorted(runs):
    print(f"chunk {c}: {len(runs[c])} run(s), ceilings " +
          ", ".join(f"{r['ceiling_bytes_per_s'] / 1e12:.3f}" for r in runs[c]) + " TB/s")
t = {c: us(c) for c in runs}
for c, (_, h) in t.items():
    bad = [k for k, v in h.items() if len(v) > 1]
    print(f"chunk {c}: rows whose out_fnv1a differs between runs: {len(bad)}" + (f" {bad[:3]}" if bad else ""))
ceil = {c: statistics.mean(r["ceiling_bytes_per_s"] for r in runs[c]) for c in runs}
bytes_ = {k: x["bytes"] for k, x in rows(runs[512][0]).items()}

chunks = sorted(runs)
print()
print(f"{'row':48s} " + " ".join(f"c{c:<8d}" for c in chunks) + " c1024/c512  sdpa")
for k in sorted(t[512][0], key=lambda k: (k[0].split('/')[2], k[0], k[1], k[2])):
    v = [t[c][0].get(k) for c in chunks]
    ratio = t[1024][0][k] / t[512][0][k] if 1024 in t and k in t[1024][0] else float("nan")
    print(f"{'/'.join(k):48s} " + " ".join(f"{x:<9.1f}" if x else f"{'-':9s}" for x in v) +
          f" {ratio:<10.3f}  {sdpa.get(k, float('nan')):.1f}")

def targets(c):
    u = t[c][0]
    def g(shape, b, ctx, f, a="window"):
        return u.get((f"{shape}/b{b}/ctx{ctx}", f, a))
    S = {"d256": "24q/4kv/d256", "d128": "32q/8kv/d128"}
    out = {}
    for s, sh in S.items():
        bf = g(sh, 8, 32768, "bf16")
        out[f"bf16 of ceiling 32K x b8 {s} (>= 0.90)"] = bytes_[(f"{sh}/b8/ctx32768", "bf16", "window")] / (bf * 1e-6) / ceil[c]
        out[f"q4 / bf16 32K x b8 {s} (<= 0.40)"] = g(sh, 8, 32768, "q4") / bf
        out[f"fp8 / bf16 32K x b8 {s} (<= 0.60)"] = g(sh, 8, 32768, "fp8") / bf
        out[f"b1 x 4K {s} slowest, us (<= 15)"] = max(v for k, v in u.items() if k[0] == f"{sh}/b1/ctx4096")
    over = [(u[k] / sdpa[k], k) for k in u if k[1] == "bf16" and int(k[0].split("ctx")[1]) >= 32768 and k in sdpa]
    out["bf16 >= 32K rows with ours / SDPA > 1.0 (0)"] = f"{sum(1 for r, _ in over if r > 1.0)} of {len(over)}, worst {max(over)[0]:.3f} {'/'.join(max(over)[1])}" if over else "not measured"
    return out

print()
for c in chunks:
    print(f"targets at chunk {c} (mean of its runs; SDPA from the chunk-512 run):")
    for n, v in targets(c).items():
        print(f"  {n}: {v if isinstance(v, str) else round(v, 4)}")
if 1024 in t:
    common = [k for k in t[512][0] if k in t[1024][0]]
    r = sorted(t[1024][0][k] / t[512][0][k] for k in common)
    print(f"\nc1024 / c512 over {len(r)} rows: min {r[0]:.3f}, median {statistics.median(r):.3f}, max {r[-1]:.3f}")
    for lo, name in ((32768, ">= 32K"), (0, "all")):
        sel = [t[1024][0][k] / t[512][0][k] for k in common if int(k[0].split("ctx")[1]) >= lo]
        print(f"  {name}: {sum(1 for x in sel if x < 1)} of {len(sel)} faster at 1024")
    # run-to-run spread within a chunk: the noise the ratio is read against
    for c in chunks:
        if len(runs[c]) > 1:
            a, b = (rows(runs[c][0]), rows(runs[c][1]))
            s = sorted(b[k]["median_us"] / a[k]["median_us"] for k in a if k in b)
            print(f"  chunk {c} run 2 / run 1: min {s[0]:.3f}, median {statistics.median(s):.3f}, max {s[-1]:.3f}")
