#!/usr/bin/env python3
# rope10: same-call A/B summary of bench rope-store runs W/<var>-<round>.json (A: main's binary;
# the others: the rope10 binary with KC_ROPE10 bits; bf16 takes only bit 16, so its P / CP rows
# run A's / C's kernel: a noise control). Per row: each run's of_ceiling, the median us
# and time / A; out_hash against A's (every run, every row); per variant and format: rows >= 0.85
# of the copy ceiling from 64 MiB up, min-max (mean). Per format the pick: most rows >= 0.85, then
# the best mean, among variants with A's hashes, every row verified and no 1 MiB row over 1.1x A's
# time; a variant with more bits must beat one with fewer by 0.004 of mean. Prints "knob: xb,xf,xq".
import json, sys, glob, os, statistics as st
W = sys.argv[1]
BF16 = ('C',)  # the variants that change bf16's kernel (call 1: bit 16 only; exp2.sh: none)
knobs = {'A': 0, 'C': 16, 'P': 32, 'CP': 48}  # call 1; or name:bits arguments after W (exp2.sh)
if len(sys.argv) > 2: knobs = {a.split(':')[0]: int(a.split(':')[1]) for a in sys.argv[2:]}
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
print('of_ceiling per run')
print('%-20s' % 'row' + ''.join('%-20s' % v for v in vs))
bad = {}; unver = {}
for c in cfgs:
    line = '%-20s' % c
    f = c.split('/')[1]
    for v in vs:
        x = runs[v].get(c, [])
        if not x: line += '%-20s' % '-'; bad[(v, f)] = bad.get((v, f), 0) + 1; continue
        line += '%-20s' % '/'.join('%.3f' % a[0] for a in x)
        hs = set(a[2] for a in x); ha = set(a[2] for a in runs['A'].get(c, []))
        if hs != ha or len(hs) != 1 or '?' in hs: bad[(v, f)] = bad.get((v, f), 0) + 1
        unver[(v, f)] = unver.get((v, f), 0) + sum(1 for a in x if not a[3])
    print(line)
print()
print('median us (time / A)')
for c in cfgs:
    print('%-20s' % c + ''.join('%-20s' % ('%.2f (%.3f)' % (med(v, c, 1), med(v, c, 1) / med('A', c, 1)) if c in runs[v] else '-') for v in vs))
print()
nbits = lambda v: bin(knobs[v]).count('1')
pick = {}
tot = {v: [0, []] for v in vs}
for f in ('bf16', 'fp8', 'q4'):
    sc = {}
    for v in vs:
        m = [med(v, c) for c in cfgs if big(c) and '/%s/' % f in c and c in runs[v]]
        r1 = [med(v, c, 1) / med('A', c, 1) for c in cfgs if c.startswith('1MiB/%s/' % f) and c in runs[v]]
        rb = [med(v, c, 1) / med('A', c, 1) for c in cfgs if big(c) and '/%s/' % f in c and c in runs[v]]
        ok = bad.get((v, f), 0) == 0 and unver.get((v, f), 0) == 0 and max(r1 or [9]) <= 1.1 and len(m) == 9
        n85 = sum(1 for x in m if x >= 0.85)
        sc[v] = (n85, st.mean(m) if m else 0, ok)
        tot[v][0] += n85; tot[v][1] += m
        print('%-5s %-5s rows>=0.85 %d/%d  %.3f-%.3f (mean %.4f)  time/A >=64 %.3f-%.3f  1MiB max %.3f  hash-mismatch %d unverified %d%s' % (
            f, v, n85, len(m), min(m or [0]), max(m or [0]), sc[v][1], min(rb or [0]), max(rb or [0]), max(r1 or [0]),
            bad.get((v, f), 0), unver.get((v, f), 0), '' if ok else '  (excluded)'))
    cands = sorted([v for v in vs if sc[v][2] and v != 'A' and (f != 'bf16' or v in BF16)], key=lambda v: nbits(v))
    best = 'X0' if 'X0' in cands else 'A'
    for v in cands:
        b = sc[best]; c = sc[v]
        if (c[0] > b[0]) or (c[0] == b[0] and c[1] > b[1] + (0.004 if nbits(v) > nbits(best) else 0)): best = v
    pick[f] = best
    print('pick %s: %s' % (f, best))
    print()
for v in vs:
    print('%-5s all formats rows>=0.85 %2d of %d, mean %.4f' % (v, tot[v][0], len(tot[v][1]), st.mean(tot[v][1]) if tot[v][1] else 0))
print('knob: %d,%d,%d' % tuple(knobs[pick[f]] for f in ('bf16', 'fp8', 'q4')))
