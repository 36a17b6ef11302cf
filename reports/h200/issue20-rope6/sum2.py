# exp2.sh's bench receipts: of_ceiling per row from 64 MiB up, per run (main, cand, s3, s4 and
# the round); means per format; the best fp8 / q4 knob among cand (''), s3 ('r,3'), s4 ('r,4').
import json, glob, os, sys, collections
W = sys.argv[1]
runs = collections.defaultdict(dict)
for f in sorted(glob.glob(os.path.join(W, '*-[0-9].json'))):
    base = os.path.basename(f)[:-5]
    var, rnd = base.rsplit('-', 1)
    try:
        d = json.load(open(f))
    except Exception:
        continue
    runs[var][rnd] = {r['config']: r['of_ceiling'] for r in d['rows'] if r.get('verified') and 'of_ceiling' in r}
    bad = [r['config'] for r in d['rows'] if not r.get('verified')]
    if bad: print('NOT VERIFIED', base, bad)
vs = [v for v in ('main', 'cand', 's3', 's4') if v in runs]
cfgs = sorted({c for v in vs for r in runs[v].values() for c in r if int(c.split('MiB')[0]) >= 64},
              key=lambda c: (c.split('/')[1], int(c.split('MiB')[0]), c))
print('%-18s' % 'row' + ''.join('%-14s' % v for v in vs))
for c in cfgs:
    print('%-18s' % c + ''.join('%-14s' % '/'.join('%.3f' % runs[v][r][c] for r in sorted(runs[v]) if c in runs[v][r]) for v in vs))
score = {}
for v in vs:
    line = []
    for fmt in ('bf16', 'fp8', 'q4'):
        xs = [x for r in runs[v].values() for c, x in r.items() if '/%s/' % fmt in c and int(c.split('MiB')[0]) >= 64]
        if xs: line.append('%s %.3f-%.3f (%.3f)' % (fmt, min(xs), max(xs), sum(xs) / len(xs)))
    print(v, '  '.join(line))
    q = [x for r in runs[v].values() for c, x in r.items() if ('/fp8/' in c or '/q4/' in c) and int(c.split('MiB')[0]) >= 64]
    if v != 'main' and q: score[v] = sum(q) / len(q)
best = max(score, key=score.get) if score else 'cand'
print('best knob: ' + {'cand': '', 's3': 'r,3', 's4': 'r,4'}[best])
