# persist1: same-call A/B summary (call.sh). ab-<variant>-r<round>.json bench receipts; A = main 17be3b1
# (relinked); P0 = the head, PS / PN its -D variants, R = the head with KC_ATTN_PERSIST=0.
import json, sys, glob, os, re, statistics as st, collections
W = sys.argv[1]
t = collections.defaultdict(dict); h = collections.defaultdict(dict); sd = {}
for f in sorted(glob.glob(W + '/ab-*.json')):
    v, r = re.match(r'ab-(\w+)-r(\d+)\.json', os.path.basename(f)).groups()
    try: d = json.load(open(f))
    except Exception as e: print(f, e); continue
    for row in d['rows']:
        k = row['config'] + ' ' + row['format'] + ' ' + row['addressing']
        t[(k, v)][int(r)] = row['median_us']; h[(k, v)][int(r)] = row.get('out_fnv1a')
def sk(k):
    m = re.search(r'd(\d+)/b(\d+)/ctx(\d+)', k)
    return (k.split()[1], int(m.group(1)), int(m.group(3)), int(m.group(2)), k.split()[2])
keys = sorted({k for k, _ in t}, key=sk)
V = ['A'] + sorted({v for _, v in t if v != 'A'})
print(f"{'row':48s}{'A us':>9s}" + ''.join(f'{v + "/A":>8s}' for v in V[1:]) + '  fnv=A  rounds(A | ' + ' | '.join(V[1:]) + ')')
rat = collections.defaultdict(list); bad = []
for k in keys:
    if (k, 'A') not in t: continue
    a = st.median(t[(k, 'A')].values()); line = f'{k:48s}{a:9.1f}'
    for v in V[1:]:
        if (k, v) in t:
            x = st.median(t[(k, v)].values()) / a; rat[v].append((x, k)); line += f'{x:8.3f}'
            if set(h[(k, v)].values()) != set(h[(k, 'A')].values()): bad.append((k, v))
        else: line += f'{"-":>8s}'
    same = all(set(h[(k, v)].values()) == set(h[(k, 'A')].values()) for v in V[1:] if (k, v) in h)
    line += f'  {str(same):5s}  ' + ' | '.join(' '.join(f'{t[(k, v)][r]:.1f}' for r in sorted(t[(k, v)])) for v in V if (k, v) in t)
    print(line)
for v in V[1:]:
    xs = [x for x, _ in rat[v]]
    if not xs: continue
    for lab, sel in (('all', lambda k: True), ('>=32K', lambda k: 'ctx4096' not in k), ('4K', lambda k: 'ctx4096' in k)):
        ys = [x for x, k in rat[v] if sel(k)]
        if ys: print(f'{v}/A {lab}: median {st.median(ys):.3f} range {min(ys):.3f}-{max(ys):.3f} over {len(ys)} rows')
print('rows with out_fnv1a different from A:', bad)
