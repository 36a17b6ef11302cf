import json, sys, glob, statistics as st, collections, re, os
W = sys.argv[1]
t = collections.defaultdict(list); h = collections.defaultdict(set)
for f in sorted(glob.glob(W + '/ab-*.json')):
    v = os.path.basename(f)[3:].rsplit('-r', 1)[0]
    try: d = json.load(open(f))
    except Exception as e: print(f, e); continue
    for r in d['rows']:
        k = r['config'].split('/')[2] + ' ' + r['format']
        t[(k, v)].append(r['median_us']); h[(k, v)].add(r['out_fnv1a'])
keys = sorted({k for k, _ in t})
print('row          ' + ''.join(f'{v:>24s}' for v in ('base', 'A', 'B3')) + '   A/base  B3/base  fnv(A==base)')
for k in keys:
    cells = []
    for v in ('base', 'A', 'B3'):
        x = t.get((k, v), [])
        cells.append(f"{'/'.join(f'{y:.1f}' for y in x):>24s}")
    b, a, b3 = (st.median(t[(k, v)]) if t.get((k, v)) else float('nan') for v in ('base', 'A', 'B3'))
    print(f'{k:13s}' + ''.join(cells) + f'   {a/b:.3f}   {b3/b:.3f}   {h[(k,"A")] == h[(k,"base")]} {sorted(h[(k,"A")])}')
for d in ('d128', 'd256'):
    for v in ('base', 'A', 'B3'):
        f8, b16 = t.get((d + ' fp8', v)), t.get((d + ' bf16', v))
        if f8 and b16: print(f'{d} {v}: fp8/bf16 = {st.median(f8) / st.median(b16):.3f} (medians {st.median(f8):.1f} / {st.median(b16):.1f})')
rows = {}
for v in ('base', 'A'):
    try: rows[v] = {r['config'] + '/' + r['addressing']: (r['out_fnv1a'], r['median_us']) for r in json.load(open(f'{W}/fp8rows-{v}.json'))['rows']}
    except Exception as e: print('fp8rows', v, e)
if len(rows) == 2:
    common = sorted(set(rows['base']) & set(rows['A']))
    same = [k for k in common if rows['base'][k][0] == rows['A'][k][0]]
    print(f'fp8 rows: {len(same)} of {len(common)} with the same out_fnv1a; differ: {[k for k in common if k not in same]}')
    rat = sorted(rows['A'][k][1] / rows['base'][k][1] for k in common)
    if rat: print(f'fp8 rows A/base time (one run each): min {rat[0]:.3f} median {st.median(rat):.3f} max {rat[-1]:.3f}')
for f in ('qp-A.log', 'san-mem-A.log'):
    try:
        L = open(f'{W}/{f}').read().splitlines()
        print(f, '|', ' | '.join(l.strip()[:110] for l in L if re.search(r'cases run|verdict|attention-bound|ERROR SUMMARY|controls|PASS|FAIL', l))[:600])
    except Exception as e: print(f, e)
for v in ('base', 'A'):
    try:
        L = open(f'{W}/ncu-{v}-details.csv').read().splitlines()
        want = ('Duration', 'DRAM Throughput', 'Compute (SM) Throughput', 'Warp Cycles Per Issued Instruction', 'Executed Instructions', 'Issue Slots Busy', 'Registers Per Thread', 'Achieved Active Warps Per SM', 'L2 Cache Throughput', 'No Eligible', 'Issued Warp Per Scheduler')
        out = []
        for l in L:
            c = [x.strip('"') for x in re.findall(r'"[^"]*"', l)]
            if len(c) >= 3 and c[-3] in want: out.append(f'{c[-3]}={c[-1]}{c[-2] if c[-2] not in ("", "%") else ("%" if c[-2]=="%" else "")}')
        print('ncu', v, '; '.join(dict.fromkeys(out)))
    except Exception as e: print('ncu', v, e)
