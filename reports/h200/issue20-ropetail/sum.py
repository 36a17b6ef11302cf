#!/usr/bin/env python3
# Same-call A/B of bench rope-store runs W/<A|T>-<round>.json: per row each run's of_ceiling, the
# median us and T / A, whether every run of T has A's out_hash and every row verified; per format
# the rows >= 0.85 of the copy ceiling from 64 MiB up (median of the runs), min-max.
import json, sys, glob, os, statistics as st
W = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(W, '[AT]-[0-9].json'))):
    v = os.path.basename(f)[0]
    for row in json.load(open(f)).get('rows', []):
        if 'median_us' in row:
            runs.setdefault(v, {}).setdefault(row['config'], []).append(
                (row['of_ceiling'], row['median_us'], row.get('out_hash', '?'), bool(row.get('verified'))))
A, T = runs.get('A', {}), runs.get('T', {})
print('%-18s %-20s %-20s %-8s %-8s %-6s %s' % ('row', 'A of_ceiling', 'T of_ceiling', 'A us', 'T us', 'T/A', 'hash'))
for c in A:
    if c not in T: continue
    a, t = A[c], T[c]
    ma, mt = st.median(x[1] for x in a), st.median(x[1] for x in t)
    same = len(set(x[2] for x in a + t)) == 1 and all(x[3] for x in a + t)
    print('%-18s %-20s %-20s %-8.2f %-8.2f %-6.3f %s' % (c, '/'.join('%.3f' % x[0] for x in a), '/'.join('%.3f' % x[0] for x in t),
                                                     ma, mt, mt / ma, 'same' if same else 'DIFFERENT'))
print()
for f in ('bf16', 'fp8', 'q4'):
    for v, R in (('A', A), ('T', T)):
        m = [st.median(x[0] for x in R[c]) for c in R if int(c.split('MiB')[0]) >= 64 and '/%s/' % f in c]
        if m: print('%s %-4s >= 0.85 from 64 MiB: %d of %d, %.3f-%.3f' % (v, f, sum(x >= 0.85 for x in m), len(m), min(m), max(m)))
