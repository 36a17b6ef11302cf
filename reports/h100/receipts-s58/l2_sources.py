#!/usr/bin/env python3
"""Summary of call3.sh: (1) the raw memory-table metrics (L1 / L2 / DRAM sectors, requests,
hits) of our partial beside cuDNN's kernel, side by side; (2) from the source counters of our
partial, the memory columns summed per opcode and the instructions with the most L2 sectors.
Usage: l2_sources.py DIR"""
import collections, csv, io, os, re, sys


def num(s):
    s = (s or "").replace(",", "").strip()
    try:
        return float(s)
    except ValueError:
        return None


def raw(path):
    """{metric: value} of each kernel in an ncu --page raw --csv file."""
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(l for l in lines[start:] if l.startswith('"')))))
    head, body = rows[0], rows[2:]  # rows[1]: units
    return [dict(zip(head, r)) for r in body]


def main():
    d = sys.argv[1]
    ours, cud = raw(os.path.join(d, "raw-ours.csv")), raw(os.path.join(d, "raw-cudnn.csv"))
    print(f"raw: ours {len(ours)} kernel(s), cudnn {len(cud)} kernel(s)")
    if ours and cud:
        a, b = ours[0], cud[0]
        print(f"  ours:  {a.get('Kernel Name', '')[:80]}\n  cudnn: {b.get('Kernel Name', '')[:80]}")
        keys = [k for k in a if re.match(r"(lts__t_(sectors|requests|sector_hit)|l1tex__t_(sectors|requests)|dram__sectors|"
                                         r"lts__d_|lts__t_sectors_srcunit|l1tex__m_)", k)]
        print(f"{'metric':75s} {'ours':>18s} {'cudnn':>18s}")
        for k in sorted(keys):
            va, vb = num(a.get(k)), num(b.get(k))
            if (va or 0) == 0 and (vb or 0) == 0:
                continue
            print(f"{k[:75]:75s} {a.get(k, ''):>18s} {b.get(k, ''):>18s}")
    p = os.path.join(d, "src-ours.csv")
    if not os.path.exists(p):
        print("no source counters")
        return
    rows = list(csv.reader(open(p, newline="", errors="replace")))
    hi = next((i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r)), None)
    if hi is None:
        print("source CSV without a header")
        return
    head = [c.strip() for c in rows[hi]]
    src = head.index("Source")
    mem = [i for i, c in enumerate(head) if re.search(r"L2|Sector|Excessive|L1|Request|Shared", c)]
    exe = next((i for i, c in enumerate(head) if c.startswith("Instructions Executed")), None)
    print("\nsource columns:", " | ".join(head))
    by_op = collections.defaultdict(lambda: collections.Counter())
    lines = []
    for r in rows[hi + 1:]:
        if len(r) <= src:
            continue
        text = re.sub(r"^@!?U?P\w+\s+", "", r[src].strip())
        op = text.split(" ")[0] if text else ""
        if not op:
            continue
        for i in mem + ([exe] if exe is not None else []):
            v = num(r[i]) if i < len(r) else None
            if v:
                by_op[op][head[i]] += v
        lines.append((r, text))
    cols = [head[i] for i in mem]
    print("\nper opcode (memory columns summed; opcodes with any):")
    for op, c in sorted(by_op.items(), key=lambda kv: -sum(v for k, v in kv[1].items() if "L2" in k)):
        if any(c[k] for k in cols):
            print(f"  {op:28s} " + "; ".join(f"{k}={c[k]:.4g}" for k in cols if c[k]))
    l2 = [i for i in mem if "L2" in head[i]]
    if l2:
        key = l2[0]
        top = sorted(lines, key=lambda x: -(num(x[0][key]) or 0) if key < len(x[0]) else 0)[:20]
        print(f"\ntop instructions by {head[key]}:")
        for r, text in top:
            print(f"  {text[:70]:70s} " + "; ".join(f"{head[i]}={r[i]}" for i in mem if i < len(r) and num(r[i])))


if __name__ == "__main__":
    main()
