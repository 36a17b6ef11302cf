import json, sys, glob, statistics
d = sys.argv[1]
def rows(f):
    r = json.load(open(f)); return {(x['config'], x['format'], x['addressing']): x for x in r['rows'] if 'median_us' in x}
base = [rows(f) for f in sorted(glob.glob(d + '/bench-base-*.json'))]
head = [rows(f) for f in sorted(glob.glob(d + '/bench-head-*.json'))]
keys = sorted(base[0])
print(f"{'row':52s} {'base us':>9s} {'head us':>9s} {'head/base':>9s} bytes")
rat = []
for k in keys:
    b = statistics.median([x[k]['median_us'] for x in base if k in x]); h = statistics.median([x[k]['median_us'] for x in head if k in x])
    fb = {x[k].get('out_fnv1a') for x in base if k in x}; fh = {x[k].get('out_fnv1a') for x in head if k in x}
    same = 'same' if fb == fh and len(fb) == 1 else f'DIFF {fb} {fh}'
    rat.append((k, h / b))
    print(f"{'/'.join(k):52s} {b:9.1f} {h:9.1f} {h/b:9.3f} {same}")
for f in ['bf16', 'fp8']:
    v = [r for k, r in rat if k[1] == f]
    if v: print(f, 'median head/base', round(statistics.median(v), 3), 'min', round(min(v), 3), 'max', round(max(v), 3))
