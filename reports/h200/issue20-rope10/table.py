#!/usr/bin/env python3
# rope10: the report's table from call1/ (A = main's binary 17be3b1; C / P / CP the rope10 experiment
# binary 562782d with KC_ROPE10 = 16 / 32 / 48; bf16 takes only bit 16, so its P / CP rows run A's /
# C's kernel): per row the median us and each round's of_ceiling of A, then per variant the median
# of_ceiling and its time / A; then rows >= 0.85 from 64 MiB up per variant.
import json, glob, os, sys, statistics as st
W = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'call1')
runs = {}
for f in glob.glob(os.path.join(W, '*-[123].json')):
    v, r = os.path.basename(f)[:-5].rsplit('-', 1)
    for row in json.load(open(f))['rows']:
        runs.setdefault(v, {}).setdefault(row['config'], []).append((int(r), row['of_ceiling'], row['median_us'], row['out_hash'], row['verified']))
cfgs = [row['config'] for row in json.load(open(os.path.join(W, 'A-1.json')))['rows']]
oc = lambda v, c: st.median(x[1] for x in runs[v][c])
us = lambda v, c: st.median(x[2] for x in runs[v][c])
rd = lambda v, c: '/'.join('%.3f' % x[1] for x in sorted(runs[v][c]))
vs = ['C', 'P', 'CP']
print('| row | A (main) us | A of ceiling, rounds 1/2/3 | ' + ' | '.join('%s of ceiling (time / A)' % v for v in vs) + ' |')
print('|' + '---|' * (3 + len(vs)))
cnt = {v: {} for v in ['A'] + vs}
ok = True
for c in cfgs:
    for v in runs:
        ok &= len(set(x[3] for x in runs[v][c]) | set(x[3] for x in runs['A'][c])) == 1 and all(x[4] for x in runs[v][c])
    print('| %s | %.2f | %s | %s |' % (c, us('A', c), rd('A', c), ' | '.join('%.3f (%.3f)' % (oc(v, c), us(v, c) / us('A', c)) for v in vs)))
    if int(c.split('MiB')[0]) >= 64:
        for v in cnt: cnt[v].setdefault(c.split('/')[1], []).append(oc(v, c))
print()
for v in cnt:
    m = [x for f in cnt[v] for x in cnt[v][f]]
    print('- %s: %d of 27 rows >= 0.85 from 64 MiB up, mean %.4f; ' % (v, sum(1 for x in m if x >= 0.85), st.mean(m)) + '; '.join('%s %d of 9, %.3f-%.3f (mean %.3f)' % (f, sum(1 for x in cnt[v][f] if x >= 0.85), min(cnt[v][f]), max(cnt[v][f]), st.mean(cnt[v][f])) for f in cnt[v]))
print('- out_hash equal to A\'s and verified on every row of every run of every variant: %s' % ok)
