# persist1: per (head_dim, format) medians of variant / A over the rows >= 32K and the 4K rows,
# from one call's ab-<variant>-r<round>.json receipts (medians of the rounds per row first).
import json, sys, glob, os, re, statistics as st, collections
W = sys.argv[1]
t = collections.defaultdict(list)
for f in glob.glob(W + '/ab-*.json'):
    v = re.match(r'ab-(\w+)-r\d+\.json', os.path.basename(f)).group(1)
    for r in json.load(open(f))['rows']:
        t[(r['config'], r['format'], r['addressing'], v)].append(r['median_us'])
V = sorted({k[3] for k in t if k[3] != 'A'})
rows = sorted({k[:3] for k in t})
g = collections.defaultdict(list)
for c, f, a in rows:
    d = re.search(r'/d(\d+)/', c).group(1); long = 'ctx4096' not in c
    for v in V:
        if (c, f, a, v) in t and (c, f, a, 'A') in t:
            g[(f, d, long, v)].append(st.median(t[(c, f, a, v)]) / st.median(t[(c, f, a, 'A')]))
print(f"{'group':24s}" + ''.join(f'{v + "/A median (range)":>28s}' for v in V))
for f in ('bf16', 'fp8'):
    for d in ('128', '256'):
        for long in (True, False):
            line = f"{f + ' d' + d + (' >=32K' if long else ' 4K'):24s}"
            for v in V:
                x = g[(f, d, long, v)]
                line += f'{st.median(x):>10.3f} ({min(x):.3f}-{max(x):.3f})' if x else f'{"-":>28s}'
            print(line)
