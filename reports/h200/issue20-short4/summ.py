import json, sys, os, glob, statistics as st, re
W = sys.argv[1]
def rows(f):
    try: return {(r['config'], r['format'], r['addressing']): r for r in json.load(open(f))['rows']}
    except Exception as e: return {}
print(open(os.path.join(W, 'rc.txt')).read() if os.path.exists(os.path.join(W, 'rc.txt')) else 'no rc')
for tag in ['b1-base-1','b1-new-1','b1-two-1','b1-off-1','b1g-base','b1g-new','b1g-two','b1-base-2','b1-new-2','b1-two-2']:
    R = rows(os.path.join(W, tag + '.json'))
    if not R: continue
    for sh in ['24q/4kv/d256/b1/ctx4096', '32q/8kv/d128/b1/ctx4096']:
        cells = []
        for f in ['bf16','fp8','q4']:
            v = [R[k]['median_us'] for k in R if k[0]==sh and k[1]==f]
            cells.append('%s %s' % (f, '/'.join('%.1f' % x for x in v)))
        slow = max(R[k]['median_us'] for k in R if k[0]==sh)
        print('%-10s %s slowest %.1f | %s' % (tag, sh.split('/')[2], slow, ' '.join(cells)))
# hashes
H = {}
for tag in ['b1-base-1','b1-new-1','b1-two-1','b1-off-1','b1-new-2','b1-two-2','full-new']:
    R = rows(os.path.join(W, tag + '.json'))
    for k, r in R.items():
        if 'out_fnv1a' in r: H.setdefault(k, {})[tag] = r['out_fnv1a']
same = sum(1 for k in H if len(set(H[k].values())) == 1 and len(H[k]) >= 3)
print('out_fnv1a: rows with >= 3 variants, all equal: %d of %d' % (same, sum(1 for k in H if len(H[k]) >= 3)))
for k in H:
    if len(set(H[k].values())) != 1: print('  DIFF', k, H[k])
A, Bn = rows(os.path.join(W, 'full-base.json')), rows(os.path.join(W, 'full-new.json'))
if A and Bn:
    g = {}
    for k in A:
        if k in Bn:
            m = re.search(r'/b(\d+)/ctx(\d+)', k[0]); grp = 'b%s x %sK' % (m.group(1), int(m.group(2)) // 1024)
            g.setdefault(grp, []).append((Bn[k]['median_us'] / A[k]['median_us'], k))
    for grp, v in g.items():
        rs = [x[0] for x in v]; w = max(v)
        print('full %-12s n=%3d median %.3f min %.3f max %.3f (%s)' % (grp, len(rs), st.median(rs), min(rs), w[0], '/'.join(w[1])))
for f in ['qp-new','san-mem','san-race','san-sync'] + ['mut-' + m for m in ['merge-skip-nonfinite-dev','pv-group-drop']]:
    p = os.path.join(W, f + '.json')
    try:
        d = json.load(open(p)); print(f, d.get('verdict'), d['cases'], [ (x['name'], x['passed'], x['total']) for x in d['gates'] if x['name'] in ('rows==solo','attention-bound')], 'controls red %d/%d' % (sum(c.get('red', False) for c in d.get('controls', [])), len(d.get('controls', []))))
    except Exception as e: print(f, 'no receipt', e)
for f in ['qp-new.err','san-mem.log','san-race.log','san-sync.log']:
    p = os.path.join(W, f)
    if os.path.exists(p):
        t = open(p, errors='replace').read()
        L = [l for l in t.splitlines() if 'short path: d' in l]
        c = {}
        for l in L:
            m = re.search(r'd (\d+), cl (\d+).*merge (.*)', l); c[m.groups()] = c.get(m.groups(), 0) + 1
        print(f, 'short launches', c, '| ERROR SUMMARY:', re.findall(r'ERROR SUMMARY: .*|RACECHECK SUMMARY: .*', t)[-2:])
