#!/usr/bin/env python3
# rope9: the report's table from call1/ (A = main's binary, the others the rope9 experiment
# binary): per row the median us and each round's of_ceiling of A and E, E / A time, the final
# build's kernel (E where the row's stores fit in the L2: 1 and 64 MiB here; A above) and its
# median of_ceiling, and the other variants' median of_ceiling; then rows >= 0.85 from 64 MiB up.
import json, glob, os, sys, statistics as st
W = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'call1')
runs = {}
for f in glob.glob(os.path.join(W, '*-[123].json')):
    v, r = os.path.basename(f)[:-5].rsplit('-', 1)
    for row in json.load(open(f))['rows']:
        runs.setdefault(v, {}).setdefault(row['config'], []).append((int(r), row['of_ceiling'], row['median_us'], row['out_hash'], row['verified'], row['rows'], row['write_bytes']))
cfgs = [row['config'] for row in json.load(open(os.path.join(W, 'A-1.json')))['rows']]
oc = lambda v, c: st.median(x[1] for x in runs[v][c])
us = lambda v, c: st.median(x[2] for x in runs[v][c])
rd = lambda v, c: '/'.join('%.3f' % x[1] for x in sorted(runs[v][c]))
L2 = 50 * 2**20  # the H200's L2 (cudaDevAttrL2CacheSize); the rule only needs 64 MiB rows' stores below it and 256 MiB rows' above
others = ['C', 'T', 'TP', 'TCE', 'TPCE']
print('| row | rows | stored MB | A (main) us | A of ceiling, rounds 1/2/3 | E us | E of ceiling, rounds 1/2/3 | E / A time | final | final of ceiling | ' + ' | '.join(others) + ' |')
print('|' + '---|' * (10 + len(others)))
cnt = {'A': {}, 'E': {}, 'final': {}}
hashes_ok = True
for c in cfgs:
    mib = int(c.split('MiB')[0]); f = c.split('/')[1]
    stored = runs['A'][c][0][6]
    fin = 'E' if stored <= L2 else 'A'
    for v in runs:
        if c in runs[v]:
            hashes_ok &= len(set(x[3] for x in runs[v][c]) | set(x[3] for x in runs['A'][c])) == 1 and all(x[4] for x in runs[v][c])
    print('| %s | %d | %.1f | %.2f | %s | %.2f | %s | %.3f | %s | %.3f | %s |' % (
        c, runs['A'][c][0][5], stored / 1e6, us('A', c), rd('A', c), us('E', c), rd('E', c), us('E', c) / us('A', c), fin, oc(fin, c),
        ' | '.join('%.3f' % oc(v, c) if c in runs.get(v, {}) else '-' for v in others)))
    if mib >= 64:
        for k, v in (('A', 'A'), ('E', 'E'), ('final', fin)):
            cnt[k].setdefault(f, []).append(oc(v, c))
print()
for k in cnt:
    tot = sum(sum(1 for x in m if x >= 0.85) for m in cnt[k].values())
    print('- %s: %d of 27 rows >= 0.85 from 64 MiB up; ' % (k, tot) + '; '.join('%s %d of 9, %.3f-%.3f (mean %.3f)' % (f, sum(1 for x in m if x >= 0.85), min(m), max(m), st.mean(m)) for f, m in cnt[k].items()))
print('- out_hash equal to A\'s and verified on every row of every run of every variant: %s' % hashes_ok)
