#!/usr/bin/env python3
# Same-call A/B of bench rope-store runs W/<V>-<round>.json (V one letter, A the base): per row
# each variant's median us and time / A's, and whether every run of it has A's out_hash with every
# row verified; per variant and format the rows >= 0.85 of the copy ceiling from 64 MiB up (median
# of the runs), min-max.
import json, sys, glob, os, statistics as st
W = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(W, '[A-Z]-[0-9].json'))):
    v = os.path.basename(f)[0]
    for row in json.load(open(f)).get('rows', []):
        if 'median_us' in row:
            runs.setdefault(v, {}).setdefault(row['config'], []).append(
                (row['of_ceiling'], row['median_us'], row.get('out_hash', '?'), bool(row.get('verified'))))
A = runs.get('A', {})
vs = sorted(v for v in runs if v != 'A')
print('%-19s %-22s' % ('row', 'A of_ceiling, us') + ''.join('%-30s' % (v + ': of_ceiling, us, /A') for v in vs))
for c in A:
    a = A[c]
    ma = st.median(x[1] for x in a)
    line = '%-19s %-22s' % (c, '%.3f %.2f' % (st.median(x[0] for x in a), ma))
    for v in vs:
        t = runs[v].get(c)
        if not t: line += '%-30s' % '-'; continue
        mt = st.median(x[1] for x in t)
        same = len(set(x[2] for x in a + t)) == 1 and all(x[3] for x in a + t)
        line += '%-30s' % ('%.3f %.2f %.3f %s' % (st.median(x[0] for x in t), mt, mt / ma, 'same' if same else 'DIFF'))
    print(line)
print()
for f in ('bf16', 'fp8', 'q4'):
    for v in ['A'] + vs:
        R = runs[v]
        m = [st.median(x[0] for x in R[c]) for c in R if int(c.split('MiB')[0]) >= 64 and '/%s/' % f in c]
        if m: print('%s %-4s >= 0.85 from 64 MiB: %d of %d, %.3f-%.3f' % (v, f, sum(x >= 0.85 for x in m), len(m), min(m), max(m)))
