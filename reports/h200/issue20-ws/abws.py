import json, sys, glob, os
R = sys.argv[1]
def load(p):
    try: return {(r['config'], r['format'], r['addressing']): r for r in json.load(open(p))['rows']}
    except Exception as e: print('cannot read', p, e); return {}
V = sys.argv[2] if len(sys.argv) > 2 else 'ws'
b = [load(f'{R}/bench-base-{i}.json') for i in (1, 2)]
w = [load(f'{R}/bench-{V}-{i}.json') for i in (1, 2)]
keys = sorted(set().union(*[set(x) for x in b + w]))
print(f"{'row':52s} {'base us':>16s} {'ws us':>16s} {'ws/base':>8s} {'of_ceil ws':>10s} same-bytes")
for k in keys:
    bu = [x[k]['median_us'] for x in b if k in x]; wu = [x[k]['median_us'] for x in w if k in x]
    hb = {x[k].get('out_fnv1a') for x in b if k in x}; hw = {x[k].get('out_fnv1a') for x in w if k in x}
    oc = [x[k].get('of_ceiling', 0) for x in w if k in x]
    if not bu or not wu: print('/'.join(k), 'missing'); continue
    r = min(wu) / min(bu)
    print(f"{'/'.join(k):52s} {' '.join(f'{v:7.1f}' for v in bu):>16s} {' '.join(f'{v:7.1f}' for v in wu):>16s} {r:8.3f} {max(oc):10.3f} {hb == hw and len(hb) == 1}")
