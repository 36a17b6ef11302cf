"""Compares two receipts field by field: the same keys everywhere, and the same values
except what a second run of the same binary changes too (wall times, the commit and the
start time, kv-gate's stored-arm bookkeeping, serve-gate's measured speeds).
  python3 reports/layout/receipt_fields.py BEFORE.json AFTER.json   -> exit 0 when equal"""
import json, re, sys

VOLATILE = re.compile(r'(^|\.)(time_s|total_s|wall_s|started_at|host|git|argv|decode_tok_s|file|key|from_cache|'
                      r'engine_commit|tok_s|time_to_first_token\w*_s|[a-z0-9]+\.[a-z0-9-]+\.decode_tok_s)$')


def walk(a, b, at, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f'{at}.{k}' if at else k
            if k not in a or k not in b:
                out.append(f'{p}: only in {"after" if k not in a else "before"}')
            elif not VOLATILE.search(p):
                walk(a[k], b[k], p, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f'{at}: {len(a)} -> {len(b)} entries')
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f'{at}[{i}]', out)
    elif type(a) != type(b) or a != b:
        out.append(f'{at}: {json.dumps(a)[:80]} -> {json.dumps(b)[:80]}')


diffs = []
walk(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), '', diffs)
for d in diffs:
    print('  field', d)
sys.exit(1 if diffs else 0)
