import json, sys, glob, os, statistics as st
R = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(R, 'bench-*-r*.json'))):
    v, r = os.path.basename(f)[6:-5].split('-r')
    try: d = json.load(open(f))
    except Exception as e: print('bad', f, e); continue
    runs.setdefault(v, {})[int(r)] = d
V = sorted(runs)
def key(row): return row['config'] + '/' + row['format'] + '/' + row['addressing']
rows = {}
for v in V:
    for r, d in runs[v].items():
        for row in d['rows']:
            rows.setdefault(key(row), {}).setdefault(v, []).append(row)
print('rounds:', {v: sorted(runs[v]) for v in V})
print('ceilings TB/s:', {v: [round(runs[v][r]['ceiling_bytes_per_s'] / 1e12, 3) for r in sorted(runs[v])] for v in V})
print('%-44s %s' % ('row (median us over rounds; ratio to A; fnv==A)', '  '.join('%-18s' % v for v in V)))
sd = {}
for k in rows:
    for v in ('A', 'B'):
        for row in rows[k].get(v, []):
            if row.get('sdpa_flash_us') or row.get('sdpa_cudnn_us'):
                best = min(x for x in (row.get('sdpa_flash_us'), row.get('sdpa_cudnn_us')) if x)
                sd.setdefault(k, []).append(best)
med = {}
for k in rows:
    line = '%-44s' % k
    a = st.median(x['median_us'] for x in rows[k]['A']) if 'A' in rows[k] else None
    fa = {x.get('out_fnv1a') for x in rows[k].get('A', [])}
    for v in V:
        xs = [x['median_us'] for x in rows[k].get(v, [])]
        if not xs: line += ' %-18s' % '-'; continue
        m = st.median(xs); med[(k, v)] = m
        fv = {x.get('out_fnv1a') for x in rows[k][v]}
        same = 'same' if fv == fa else ('n/a' if None in fv else 'DIFF')
        line += ' %7.1f %5.3f %-4s' % (m, m / a if a else 0, same)
    print(line)
print()
for v in V:
    over = []; n = 0
    for k in rows:
        cfg = k.split('/')
        ctx = int(cfg[4][3:]); fmt = cfg[5]
        if fmt != 'bf16' or ctx < 32768 or k not in sd or (k, v) not in med: continue
        n += 1; rr = med[(k, v)] / min(sd[k])
        if rr > 1.0: over.append(rr)
    print('%s: bf16 rows >= 32K with ours/SDPA best > 1.0 (median us / min SDPA best of A,B runs): %d of %d, worst %.3f' % (v, len(over), n, max(over) if over else 0))
for v in V:
    for r in sorted(runs[v]):
        rt = runs[v][r].get('ratios', {})
        print(v, r, {kk.split(':')[0][:40]: round(x, 4) for kk, x in rt.items() if 'ceiling' in kk or 'SDPA' in kk})
for v in V:
    for r in sorted(runs[v]):
        rs = [x['ours_over_sdpa_best'] for x in runs[v][r]['rows'] if x['format'] == 'bf16' and int(x['config'].split('ctx')[1]) >= 32768 and x.get('ours_over_sdpa_best')]
        if rs: print('%s r%d bench own ours/SDPA: %d of %d over 1.0, worst %.3f' % (v, r, sum(x > 1.0 for x in rs), len(rs), max(rs)))
