#!/usr/bin/env python3
# Same-call A/B of bench attention runs W/ab-<round>-<V>.json (A the base): per row the median
# over rounds of each variant's median us, its ratio to A's, and whether out_fnv1a is equal in
# every run of every variant; per variant the ratio's median / min / max over the bf16 rows >= 32K.
import glob, json, os, statistics as st, sys
W = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(W, 'ab-*-*.json'))):
    v = os.path.basename(f)[:-5].rsplit('-', 1)[1]
    try: d = json.load(open(f))
    except Exception: continue
    for x in d.get('rows', []):
        k = '%s/%s/%s' % (x['config'], x['format'], x['addressing'])
        runs.setdefault(v, {}).setdefault(k, []).append((x['median_us'], x.get('out_fnv1a')))
A = runs.get('A', {}); vs = [v for v in 'DNKM' if v in runs]
print('%-38s %8s ' % ('row', 'A us') + ' '.join('%13s' % (v + ' us (/A)') for v in vs) + '  hash')
rat = {v: [] for v in vs}
for k in A:
    a = st.median(x[0] for x in A[k]); line = '%-38s %8.1f ' % (k, a)
    hs = set(x[1] for x in A[k])
    for v in vs:
        t = runs[v].get(k, [])
        if not t: line += '%13s ' % '-'; continue
        m = st.median(x[0] for x in t); hs |= set(x[1] for x in t)
        line += '%6.1f (%.3f) ' % (m, m / a)
        if '/bf16/' in k and ('ctx32768' in k or 'ctx131072' in k): rat[v].append(m / a)
    print(line + (' same' if len(hs) == 1 and None not in hs else ' DIFFERENT'))
print()
for v in vs:
    if rat[v]: print('%s: bf16 rows >= 32K: time / A median %.3f, min %.3f, max %.3f (%d rows)' % (v, st.median(rat[v]), min(rat[v]), max(rat[v]), len(rat[v])))
