#!/usr/bin/env python3
# rope7: same-call A/B summary of bench rope-store runs W/<var>-<round>.json (var: knob name).
# Prints per row the median of_ceiling per variant, hashes against A, rows >= 0.85 per format,
# 1 MiB time ratios, and the winner (best mean of_ceiling from 64 MiB up, same hashes as A,
# no 1 MiB row > 1.1x A's time): "winner: NAME KNOB".
import json, sys, glob, os, statistics as st
W = sys.argv[1]
knobs = dict(A=0, F=4, FL=12, FLG=28, G=16)
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
        det = row.get('verification', {}).get('detail', '')
        h = det.split('rope7 ')[-1].split(' (')[0] if 'rope7' in det else '?'
        runs.setdefault(v, {}).setdefault(row['config'], []).append((row['of_ceiling'], row['median_us'], h, row.get('verified')))
vs = [v for v in knobs if v in runs]
cfgs = [c for c in runs.get('A', {})]
def big(c): return int(c.split('MiB')[0]) >= 64
print('%-20s' % 'row' + ''.join('%-22s' % v for v in vs))
bad_hash = {v: 0 for v in vs}; unver = {v: 0 for v in vs}
for c in cfgs:
    line = '%-20s' % c
    for v in vs:
        x = runs[v].get(c, [])
        if not x: line += '%-22s' % '-'; continue
        oc = '/'.join('%.3f' % a[0] for a in x)
        line += '%-22s' % oc
        hs = set(a[2] for a in x); ha = set(a[2] for a in runs['A'].get(c, []))
        if hs != ha or len(hs) != 1: bad_hash[v] += 1
        unver[v] += sum(1 for a in x if not a[3])
    print(line)
print()
res = {}
for v in vs:
    fm = {}
    for f in ('bf16', 'fp8', 'q4'):
        med = [st.median(a[0] for a in runs[v][c]) for c in cfgs if big(c) and '/%s/' % f in c and c in runs[v]]
        fm[f] = (sum(1 for m in med if m >= 0.85), len(med), min(med) if med else 0, max(med) if med else 0, st.mean(med) if med else 0)
    allm = [st.median(a[0] for a in runs[v][c]) for c in cfgs if big(c) and c in runs[v]]
    r1 = [st.median(a[1] for a in runs[v][c]) / st.median(a[1] for a in runs['A'][c]) for c in cfgs if c.startswith('1MiB') and c in runs[v]]
    r64 = [st.median(a[1] for a in runs[v][c]) / st.median(a[1] for a in runs['A'][c]) for c in cfgs if big(c) and c in runs[v]]
    res[v] = (st.mean(allm) if allm else 0, max(r1) if r1 else 9, bad_hash[v])
    print('%-4s knob %-3d mean>=64 %.4f  ' % (v, knobs[v], res[v][0]) +
          '  '.join('%s %d/%d %.3f-%.3f (%.3f)' % ((f,) + fm[f]) for f in fm) +
          '  time/A >=64MiB %.3f-%.3f  1MiB max %.3f  hash-mismatch rows %d  unverified %d' %
          (min(r64) if r64 else 0, max(r64) if r64 else 0, res[v][1], bad_hash[v], unver[v]))
ok = [v for v in vs if res[v][2] == 0 and res[v][1] <= 1.1 and unver[v] == 0]
win = max(ok, key=lambda v: res[v][0]) if ok else 'A'
print('winner: %s %d' % (win, knobs[win]))
