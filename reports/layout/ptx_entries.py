"""PTX of two builds compared kernel by kernel (each .entry body; basic-block labels,
anonymous-namespace hashes, .loc lines and comments normalised away):
  python3 reports/layout/ptx_entries.py [--canonical] BEFORE_DIR AFTER_DIR
--canonical also renames virtual registers by their order of first appearance."""
import re, sys, glob, hashlib
def entries(path):
    txt = open(path).read()
    out = {}
    for m in re.finditer(r'^(?:\.visible |\.weak )?\.entry (\S+)\(', txt, re.M):
        i = m.start(); depth = 0; j = txt.index('{', m.end())
        k = j
        while True:
            c = txt[k]
            if c == '{': depth += 1
            elif c == '}':
                depth -= 1
                if depth == 0: break
            k += 1
        body = txt[i:k+1]
        name = re.sub(r'\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}', 'ANON', m.group(1))
        body = re.sub(r'\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}', 'ANON', body)
        body = re.sub(r'\$L__BB\d+_', 'L__BB_', body)
        body = '\n'.join(l for l in body.split('\n') if not l.strip().startswith(('.loc', '//')))
        out[name] = body
    return out
def load(d):
    allk = {}
    for p in sorted(glob.glob(d + '/*.ptx')):
        for k, v in entries(p).items():
            allk.setdefault(k, []).append((p.split('/')[-1], v))
    return allk
def canonical(body):
    """The body with each virtual register renamed by its order of first appearance (per
    class: %r, %rd, %f, %p, ...), declarations left out: two bodies equal under this are the
    same instructions in the same order on the same operands, up to register names."""
    names = {}
    def ren(m):
        cls = m.group(1)
        key = m.group(0)
        if key not in names:
            names[key] = '%' + cls + '#' + str(sum(1 for k in names if k.startswith('%' + cls) and
                                                   re.fullmatch(r'%' + cls + r'\d+', k)))
        return names[key]
    lines = [l for l in body.split('\n') if not l.strip().startswith('.reg')]
    return re.sub(r'%(rd|r|fd|f|p|rs|h|hh)(?=\d)\d+', ren, '\n'.join(lines))


canon = '--canonical' in sys.argv
argv = [x for x in sys.argv[1:] if x != '--canonical']
a, b = load(argv[0]), load(argv[1])
if canon:
    a = {k: [(f, canonical(v)) for f, v in xs] for k, xs in a.items()}
    b = {k: [(f, canonical(v)) for f, v in xs] for k, xs in b.items()}
same = diff = 0
for k in sorted(set(a) | set(b)):
    if k not in a: print('only after:', k, [x[0] for x in b[k]]); continue
    if k not in b: print('only before:', k, [x[0] for x in a[k]]); continue
    va = {x[1] for x in a[k]}; vb = {x[1] for x in b[k]}
    if va == vb: same += 1
    else: diff += 1; print('DIFFERENT:', k, [x[0] for x in a[k]], [x[0] for x in b[k]])
print(f'{same} kernels identical{" up to register names" if canon else ""}, {diff} different, {len(a)} before, {len(b)} after')
