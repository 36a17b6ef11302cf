#!/usr/bin/env python3
"""Instruction mix of one kernel from `ncu --page source --csv --print-source sass` output:
executed warp instructions and stall samples per opcode (predicate and modifiers dropped),
largest first, and the share of each. Usage: sass_mix.py FILE.csv [TOP]."""
import csv, collections, re, sys

def num(s):
    s = (s or "").replace(",", "").strip()
    try:
        return float(s)
    except ValueError:
        return 0.0

def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    rows = list(csv.reader(open(path, newline="", errors="replace")))
    head_i = next(i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r))
    head = [c.strip() for c in rows[head_i]]
    src = head.index("Source")
    exe = next(i for i, c in enumerate(head) if c.startswith("Instructions Executed"))
    stall = next((i for i, c in enumerate(head) if c.startswith("Warp Stall Sampling (All")), None)
    ex, st = collections.Counter(), collections.Counter()
    for r in rows[head_i + 1:]:
        if len(r) <= max(src, exe):
            continue
        text = re.sub(r"^@!?U?P\w+\s+", "", r[src].strip())
        op = text.split(" ")[0].split(".")[0] if text else ""
        if not op:
            continue
        ex[op] += num(r[exe])
        if stall is not None:
            st[op] += num(r[stall])
    te, ts = sum(ex.values()) or 1, sum(st.values()) or 1
    print(f"{path}: {te / 1e6:.2f} M warp instructions executed, {ts:.0f} stall samples")
    print(f"{'opcode':10s} {'M exec':>8s} {'share':>6s} {'stall':>6s}")
    for op, n in ex.most_common(top):
        print(f"{op:10s} {n / 1e6:8.3f} {n / te:6.3f} {st[op] / ts:6.3f}")

if __name__ == "__main__":
    main()
