#!/usr/bin/env python3
"""Summary of tail1's call (argv[1]: the folder): A/B medians and ratios per row with the
output hashes, the timing modes, and the block timelines (KC_ATTN_TIMELINE files)."""
import glob, json, os, statistics as st, struct, sys

W = sys.argv[1]
def load(f):
    try: return json.load(open(f))
    except Exception: return None
def key(x): return f"{x['config']}/{x['format']}/{x['addressing']}"

runs = {}
for f in sorted(glob.glob(f"{W}/ab-*.json")):
    b = f.rsplit("-", 1)[1][0]; r = load(f)
    if r: runs.setdefault(b, []).append({key(x): x for x in r["rows"]})
if runs.get("A") and runs.get("B"):
    print("row | A us | B us | B/A | hash same")
    rat = []
    for k in runs["A"][0]:
        a = [r[k]["median_us"] for r in runs["A"] if k in r]; bb = [r[k]["median_us"] for r in runs["B"] if k in r]
        hs = {r[k].get("out_fnv1a") for v in runs.values() for r in v if k in r}
        ra = st.mean(bb) / st.mean(a) if a and bb else 0
        if "bf16" in k and ("ctx32768" in k or "ctx131072" in k) and "/b1/" not in k: rat.append(ra)
        print(f"{k} | {st.mean(a):.1f} | {st.mean(bb):.1f} | {ra:.3f} | {len(hs) == 1}")
    if rat: print(f"bf16 b8/b32 >= 32K: B/A median {st.median(rat):.3f} min {min(rat):.3f} max {max(rat):.3f}")
for f in sorted(glob.glob(f"{W}/t-*.json")):
    r = load(f)
    if not r: continue
    print(os.path.basename(f), "floor", round(r.get("launch_floor_us", 0), 2), "ceiling TB/s", round(r["ceiling_bytes_per_s"] / 1e12, 3))
    for x in r["rows"]:
        print("  ", key(x), round(x["median_us"], 1), round(x["of_ceiling"], 3), round(x.get("host_enqueue_us", 0), 1))

def launches(f):
    b = open(f, "rb").read(); o = 0; out = []
    while o + 8 <= len(b):
        n0, n1 = struct.unpack_from("<II", b, o); o += 8
        p = [struct.unpack_from("<QQQ", b, o + 24 * i) for i in range(n0)]; o += 24 * n0
        m = [struct.unpack_from("<QQQQ", b, o + 32 * i) for i in range(n1)]; o += 32 * n1
        out.append((p, m))
    return out
for f in sorted(glob.glob(f"{W}/tl-*.bin")):
    L = launches(f)
    res = []
    for p, m in L[3:]:
        t0 = min(x[0] for x in p); pe = max(x[1] for x in p); ls = max(x[0] for x in p)
        life = st.median(x[1] - x[0] for x in p)
        m_in = min(x[0] for x in m); m_w = min(x[1] for x in m); m_end = max(x[2] for x in m)
        res.append((pe - t0, pe - ls, life, m_in - pe, m_w - pe, m_end - pe, m_end - t0))
    if res:
        med = [st.median(c) / 1e3 for c in zip(*res)]
        print(os.path.basename(f), f"launches {len(res)}: partial span {med[0]:.1f} us, last start->end {med[1]:.1f}, block life {med[2]:.1f}, "
              f"merge first entry {med[3]:+.1f}, first past wait {med[4]:+.1f}, last exit {med[5]:+.1f} (from the partial's end); total {med[6]:.1f}")
