# fp8s: same-call A/B summary. A = main 65d4dec, B = fp8s head (fp8 d128 4 x 4, lean shifts),
# C = B's source with the fp8 d128 ring 5 x 3 (-D KC_MMA_VRING_*). Rows: median_us per round.
import json, sys, glob, os, re, statistics as st, collections
W = sys.argv[1]
t = collections.defaultdict(dict); h = collections.defaultdict(dict)
for f in sorted(glob.glob(W + '/ab-*.json')):
    v, r = re.match(r'ab-(\w+)-r(\d+)\.json', os.path.basename(f)).groups()
    try: d = json.load(open(f))
    except Exception as e: print(f, e); continue
    for row in d['rows']:
        k = row['config'].replace('32q/8kv/d128/', '') + ' ' + row['format'] + ' ' + row['addressing']
        t[(k, v)][int(r)] = row['median_us']; h[(k, v)][int(r)] = row.get('out_fnv1a')
def sk(k):
    m = re.search(r'b(\d+)/ctx(\d+)', k)
    return (k.split()[1], int(m.group(1)) if m else 0, int(m.group(2)) if m else 0, k)
keys = sorted({k for k, _ in t}, key=sk)
V = [v for v in ('A', 'B', 'C') if any((k, v) in t for k in keys)]
fmt = lambda d: '/'.join(f'{d[r]:.1f}' for r in sorted(d))
print(f"{'row (32q/8kv/d128)':32s}" + ''.join(f'{v + " rounds":>24s}' for v in V) + '   B/A    C/A   fnv B=A C=A  B<A every round')
worst = {}
for k in keys:
    m = {v: st.median(t[(k, v)].values()) for v in V if (k, v) in t}
    same = {v: set(h[(k, v)].values()) == set(h[(k, 'A')].values()) and len(set(h[(k, v)].values())) == 1 for v in V if (k, v) in h}
    every = all(t[(k, 'B')][r] < t[(k, 'A')][r] for r in t[(k, 'A')] if r in t.get((k, 'B'), {})) if (k, 'B') in t else None
    rat = {v: m[v] / m['A'] for v in m if v != 'A' and 'A' in m}
    for v, x in rat.items():
        if 'fp8' in k: worst[v] = max(worst.get(v, 0), x)
    print(f'{k:32s}' + ''.join(f'{fmt(t[(k, v)]) if (k, v) in t else "-":>24s}' for v in V) +
          f"   {rat.get('B', float('nan')):.3f}  {rat.get('C', float('nan')):.3f}   {same.get('B')} {same.get('C')}  {every}")
for v in V:
    f8 = t.get(('b8/ctx32768 fp8 window', v)); b16 = t.get(('b8/ctx32768 bf16 window', v))
    if f8 and b16:
        print(f'{v}: fp8 / bf16 d128 32K x b8 window = {st.median(f8.values()) / st.median(b16.values()):.3f} '
              f'({st.median(f8.values()):.1f} / {st.median(b16.values()):.1f} us); per round ' +
              ' '.join(f'{f8[r] / b16[r]:.3f}' for r in sorted(f8) if r in b16))
print('worst fp8 row ratio against A:', {v: round(x, 3) for v, x in worst.items()})
print('rows with out_fnv1a different from A:', [(k, v) for k in keys for v in V if v != 'A' and (k, v) in h and set(h[(k, v)].values()) != set(h[(k, 'A')].values())])
