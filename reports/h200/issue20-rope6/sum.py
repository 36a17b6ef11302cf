# Summary of exp.sh's bench receipts: per variant (fp8/q4 'q-K_N_M', bf16 'b-N_M'), per round,
# of_ceiling per row from 64 MiB up; means; the best variant by mean over its formats' rows.
import json, glob, os, sys, collections
W = sys.argv[1]
runs = collections.defaultdict(dict)  # variant -> round -> {config: of_ceiling}
for f in sorted(glob.glob(os.path.join(W, '[qb]-*.json'))):
    base = os.path.basename(f)[:-5]
    var, rnd = base.rsplit('-', 1)
    try:
        d = json.load(open(f))
    except Exception:
        continue
    runs[var][rnd] = {r['config']: r['of_ceiling'] for r in d['rows'] if r.get('verified') and 'of_ceiling' in r}
    bad = [r['config'] for r in d['rows'] if not r.get('verified')]
    if bad: print('NOT VERIFIED', base, bad)
def mean(v): return sum(v) / len(v) if v else 0
best = {}
for kind in 'qb':
    vs = sorted(v for v in runs if v[0] == kind)
    if not vs: continue
    cfgs = sorted({c for v in vs for r in runs[v].values() for c in r}, key=lambda c: (int(c.split('MiB')[0]), c))
    print('\n%-16s' % 'row' + ''.join('%-10s' % v[2:] for v in vs))
    for c in cfgs:
        cells = []
        for v in vs:
            xs = [runs[v][r][c] for r in sorted(runs[v]) if c in runs[v][r]]
            cells.append('/'.join('%.3f' % x for x in xs))
        print('%-16s' % c.replace('MiB', 'M') + ''.join('%-10s' % x for x in cells))
    score = {}
    for v in vs:
        for fmt in (['fp8', 'q4'] if kind == 'q' else ['bf16']):
            xs = [x for r in runs[v].values() for c, x in r.items() if '/%s/' % fmt in c]
            print('%s %s mean %.3f min %.3f max %.3f (n %d)' % (v, fmt, mean(xs), min(xs or [0]), max(xs or [0]), len(xs)))
        score[v] = mean([x for r in runs[v].values() for x in r.values()])
    b = max(score, key=score.get)
    best[kind] = b
print()
if 'q' in best: print('best fp8q4: ' + best['q'][2:].replace('_', ','))
if 'b' in best: print('best bf16: ' + best['b'][2:].replace('_', ','))
