#!/usr/bin/env python3
"""Executed instructions and stall samples of the q4 partial's phases, from ncu's SASS source CSV
(call 1's sass-q4-d256.csv), split at the kernel's block barriers: prologue (view, positions,
V scales, q), the V ring's first stages and the first K tile, the scores, the softmax and the V
scale pass, the p.v, the epilogue; then the instructions with the most stall samples.
Usage: segments.py FILE.csv"""
import csv, sys

def num(s):
    try:
        return float((s or "").replace(",", ""))
    except ValueError:
        return 0.0

rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hi = next(i for i, r in enumerate(rows) if "Source" in [c.strip() for c in r])
h = [c.strip() for c in rows[hi]]
R = [r for r in rows[hi + 1:] if len(r) == len(h)]
ix = {c: i for i, c in enumerate(h)}
src = [r[ix["Source"]].strip() for r in R]
ex = [num(r[ix["Instructions Executed"]]) for r in R]
sm = [num(r[ix["Warp Stall Sampling (All Samples)"]]) for r in R]
st = [c for c in h if c.startswith("stall_") and "(Not" not in c]
bars = [i for i, s in enumerate(src) if "BAR.SYNC" in s]
# the regular kernel's barriers: after the prologue, after the scores, after the scale pass, the p.v stages'
names = ["prologue (view, positions, V scales, q)", "V ring's first stages, first K tile", "scores",
         "softmax, V scale pass", "p.v", "epilogue"]
lds = [i for i, s in enumerate(src) if "LDSM" in s]
pv = max(b for b in bars if b < lds[0])  # the p.v stages' barrier, the last one before the first ldmatrix
cuts = [0, bars[0], next(i for i, s in enumerate(src) if "HMMA" in s), bars[1], pv, max(lds) + 60, len(R)]
TE, TS = sum(ex), sum(sm)
print(f"{sys.argv[1]}: {TE / 1e6:.2f} M warp instructions, {TS:.0f} stall samples")
for k, name in enumerate(names):
    a, b = cuts[k], cuts[k + 1]
    tot = {c: sum(num(r[ix[c]]) for r in R[a:b]) for c in st}
    tt = sum(tot.values()) or 1
    top = ", ".join(f"{c[6:]} {v / tt:.2f}" for c, v in sorted(tot.items(), key=lambda x: -x[1])[:3])
    print(f"  {name:42s} {sum(ex[a:b]) / TE:6.3f} of instructions  {sum(sm[a:b]) / TS:6.3f} of stall samples  ({top})")
print("  most stall samples:")
for i in sorted(range(len(R)), key=lambda i: -sm[i])[:6]:
    top = max(st, key=lambda c: num(R[i][ix[c]]))
    print(f"    {sm[i] / TS:.4f} {top[6:]:9s} x{ex[i]:8.0f}  {src[i][:70]}")
