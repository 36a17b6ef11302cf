#!/usr/bin/env python3
"""Block timelines (KC_ATTN_TIMELINE files from the tl / v2tl / v4tl binaries, timeline-hook.patch):
per launch, the partial's span, block lives, slots filled, the active blocks in its last 40 us and
the merge's times relative to the partial's last block. argv: .bin files."""
import statistics as st, struct, sys

def launches(f):
    b = open(f, "rb").read(); o = 0; out = []
    while o + 8 <= len(b):
        n0, n1 = struct.unpack_from("<II", b, o); o += 8
        p = [struct.unpack_from("<QQQ", b, o + 24 * i) for i in range(n0)]; o += 24 * n0
        m = [struct.unpack_from("<QQQQ", b, o + 32 * i) for i in range(n1)]; o += 32 * n1
        out.append((p, m))
    return out

for f in sys.argv[1:]:
    L = launches(f)
    print(f"== {f}: {len(L)} launches, {len(L[0][0])} partial blocks, {len(L[0][1])} merge blocks")
    for li in (3, 5):
        p, m = L[li]
        t0 = min(x[0] for x in p); pe = max(x[1] for x in p)
        lives = sorted((x[1] - x[0]) / 1e3 for x in p)
        q = lambda v, f: v[min(len(v) - 1, int(f * len(v)))]
        md = sorted((x[2] - x[1]) / 1e3 for x in m); mw = sorted((x[1] - pe) / 1e3 for x in m)
        mi = sorted((x[0] - pe) / 1e3 for x in m); me = sorted((x[2] - pe) / 1e3 for x in m)
        T = int((pe - t0) / 1e3) + 1; act = [0] * T
        for x in p:
            for t in range(int((x[0] - t0) / 1e3), min(int((x[1] - t0) / 1e3), T)): act[t] += 1
        mx = max(act); ideal = sum(x[1] - x[0] for x in p) / 1e3 / mx
        print(f" launch {li}: partial span {(pe - t0) / 1e3:.1f} us; block life p10/50/90/max {q(lives, .1):.1f}/{st.median(lives):.1f}/"
              f"{q(lives, .9):.1f}/{lives[-1]:.1f}; {len({x[2] for x in p})} SMs, {mx} blocks at once; sum of lives / {mx} = {ideal:.1f} us "
              f"(span - that = {(pe - t0) / 1e3 - ideal:.1f} us of unfilled slots)")
        print(f"   merge (us from the partial's last block exit): first entry {mi[0]:+.1f}; past its wait min/med/max {mw[0]:+.1f}/"
              f"{st.median(mw):+.1f}/{mw[-1]:+.1f}; work (wait -> exit) min/med/max {md[0]:.1f}/{st.median(md):.1f}/{md[-1]:.1f}; "
              f"last exit {me[-1]:+.1f}")
        print("   partial blocks running, last 40 us (1 us bins):", act[-40:])
