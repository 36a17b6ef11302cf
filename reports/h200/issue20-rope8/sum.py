#!/usr/bin/env python3
# rope8: same-call A/B summary of bench rope-store runs W/<var>-<round>.json. Per row the
# of_ceiling of each run per variant; out_hash against A's; per variant (and per pair: one
# variant's kernels on windows / pages of 256, another's on pages of 16, the same MODE bits) the
# rows >= 0.85 from 64 MiB up per format (fp8 and q4 ranked); 1 MiB time ratios; the winner: most rows >= 0.85, then
# the best mean, among those with A's hashes, every row verified, no 1 MiB row > 1.1x A's time
# (bf16 runs the same kernel in every variant: its time ratio is printed, the noise). Prints "winner: NAME S,M,S16".
import json, sys, glob, os, statistics as st
W = sys.argv[1]
knobs = {'A': (3, 0), 'S2': (2, 0), 'S4': (4, 0), 'E3': (3, 16), 'E2': (2, 16), 'E4': (4, 16), 'CS': (3, 4), 'EF': (3, 8)}
runs = {}
for f in sorted(glob.glob(os.path.join(W, '*.json'))):
    b = os.path.basename(f)[:-5]
    if '-' not in b: continue
    v, r = b.rsplit('-', 1)
    if v not in knobs: continue
    try: d = json.load(open(f))
    except Exception: continue
    for row in d.get('rows', []):
        if 'median_us' not in row: continue
        runs.setdefault(v, {}).setdefault(row['config'], []).append((row['of_ceiling'], row['median_us'], row.get('out_hash', '?'), row.get('verified')))
vs = [v for v in knobs if v in runs]
cfgs = list(runs.get('A', {}))
def big(c): return int(c.split('MiB')[0]) >= 64
def med(v, c, i=0): return st.median(a[i] for a in runs[v][c])
print('%-20s' % 'row' + ''.join('%-22s' % v for v in vs))
bad = {v: 0 for v in vs}; unver = {v: 0 for v in vs}
for c in cfgs:
    line = '%-20s' % c
    for v in vs:
        x = runs[v].get(c, [])
        if not x: line += '%-22s' % '-'; bad[v] += 1; continue
        line += '%-22s' % '/'.join('%.3f' % a[0] for a in x)
        hs = set(a[2] for a in x); ha = set(a[2] for a in runs['A'].get(c, []))
        if hs != ha or len(hs) != 1 or '?' in hs: bad[v] += 1
        unver[v] += sum(1 for a in x if not a[3])
    print(line)
print()
print('median us (time / A):')
for c in cfgs:
    print('%-20s' % c + ''.join('%-22s' % ('%.1f (%.3f)' % (med(v, c, 1), med(v, c, 1) / med('A', c, 1)) if c in runs[v] else '-') for v in vs))
print()
def score(vx, vy):  # vx on windows / p256, vy on p16
    pick = lambda c: vy if '/p16' in c else vx
    fm = {}
    for f in ('bf16', 'fp8', 'q4'):
        m = [med(pick(c), c) for c in cfgs if big(c) and '/%s/' % f in c and c in runs[pick(c)]]
        fm[f] = (sum(1 for x in m if x >= 0.85), len(m), min(m) if m else 0, max(m) if m else 0, st.mean(m) if m else 0)
    allm = [med(pick(c), c) for c in cfgs if big(c) and '/bf16/' not in c and c in runs[pick(c)]]
    r1 = [med(pick(c), c, 1) / med('A', c, 1) for c in cfgs if c.startswith('1MiB') and c in runs[pick(c)]]
    rb = [med(pick(c), c, 1) / med('A', c, 1) for c in cfgs if big(c) and '/bf16/' in c and c in runs[pick(c)]]
    ok = bad[vx] == 0 and bad[vy] == 0 and unver[vx] == 0 and unver[vy] == 0 and max(r1 or [9]) <= 1.1
    return fm['fp8'][0] + fm['q4'][0], (st.mean(allm) if allm else 0), fm, max(r1 or [9]), ok, max(rb or [0])
res = {}
for vx in vs:
    for vy in vs:
        if knobs[vx][1] != knobs[vy][1]: continue
        res[(vx, vy)] = score(vx, vy)
for (vx, vy), (n, m, fm, r1, ok, rb) in sorted(res.items(), key=lambda kv: (-kv[1][0], -kv[1][1])):
    name = vx if vx == vy else '%s+%s/p16' % (vx, vy)
    print('%-12s fp8+q4 rows>=0.85 %2d mean %.4f  ' % (name, n, m) + '  '.join('%s %d/%d %.3f-%.3f (%.3f)' % ((f,) + fm[f]) for f in fm) +
          '  1MiB max %.3f  bf16>=64 max %.3f  hash-mismatch %d/%d unverified %d%s' % (r1, rb, bad[vx], bad[vy], unver[vx] + unver[vy], '' if ok else '  (excluded)'))
okk = [k for k in res if res[k][4]]
w = max(okk, key=lambda k: (res[k][0], res[k][1])) if okk else ('A', 'A')
print('winner: %s %d,%d,%d' % (w[0] if w[0] == w[1] else '%s+%s' % w, knobs[w[0]][0], knobs[w[0]][1], knobs[w[1]][0]))
