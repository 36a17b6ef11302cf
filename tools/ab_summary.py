#!/usr/bin/env python3
"""Summarises a same-call A/B of `bench attention` (or `bench rope-store` / `bench compact`):
the receipts of several builds (variants), each run in several interleaved rounds.

    tools/ab_summary.py DIR --base V [--out FILE]

DIR holds the receipts as ab-<variant>-<round>.json (variant and round without '-'). For each
row (config/format/addressing of attention rows, size/format/addressing of the others) it
prints each variant's best time over its rounds (median_us), every other variant's ratio to
--base's, and whether the row's output bytes agree across every variant and round
(out_fnv1a; out_hash for rope-store and compact rows): `same`, `DIFF`, or `-` where the rows
carry no hash (`--timing partial`). Then, for attention rows, the median and range of each
ratio per batch x context group (b1/ctx4096, ...). A row that a variant lacks is listed as
missing.

Exit codes: 0 every row's bytes agree; 1 a row whose bytes differ, or a row a variant lacks;
2 bad input (no receipts, a receipt that is not JSON or has no rows, a row that is not an
object or whose median_us is not a positive number or whose hash is not a string, an unknown
--base, an --out that cannot be written), naming the file and the reason, before printing.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys


def fail(msg):
    print(f"ab_summary: {msg}", file=sys.stderr)
    sys.exit(2)


def row_key(x, path):
    if not isinstance(x, dict):
        fail(f"{path}: a row that is not an object: {json.dumps(x)[:60]}")
    if "config" in x:
        fields = ("config", "format", "addressing")
    else:
        fields = ("size", "format", "addressing")
    try:
        return "/".join(str(x[f]) for f in fields)
    except KeyError as e:
        fail(f"{path}: a row without {e.args[0]!r}")


def main():
    ap = argparse.ArgumentParser(description="Summarise a same-call A/B of bench receipts.")
    ap.add_argument("dir")
    ap.add_argument("--base", required=True, help="the variant the others are divided by")
    ap.add_argument("--out", help="also write the summary to this file")
    a = ap.parse_args()
    if a.out:
        out_dir = os.path.dirname(os.path.abspath(a.out))
        if os.path.isdir(a.out):
            fail(f"--out: {a.out} is a folder")
        if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
            fail(f"--out: {out_dir} is not a writable folder")

    files = sorted(glob.glob(os.path.join(a.dir, "ab-*.json")))
    if not files:
        fail(f"{a.dir}: no ab-<variant>-<round>.json")
    times = {}  # row -> variant -> [median_us]
    hashes = {}  # row -> set of hashes (None: the row carries none)
    variants = []
    for f in files:
        m = re.fullmatch(r"ab-([^-]+)-([^-]+)\.json", os.path.basename(f))
        if not m:
            fail(f"{f}: not named ab-<variant>-<round>.json")
        v = m.group(1)
        if v not in variants:
            variants.append(v)
        try:
            with open(f) as fh:
                rows = json.load(fh)["rows"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            fail(f"{f}: not a bench receipt with rows ({type(e).__name__}: {e})")
        if not isinstance(rows, list) or not rows:
            fail(f"{f}: rows: empty or not a list")
        for x in rows:
            k = row_key(x, f)
            t = x.get("median_us")
            if not isinstance(t, (int, float)) or isinstance(t, bool) or t <= 0:
                fail(f"{f}: row {k}: median_us {t!r} is not a positive number")
            h = x.get("out_fnv1a", x.get("out_hash"))
            if h is not None and not isinstance(h, str):
                fail(f"{f}: row {k}: out_fnv1a / out_hash {h!r} is not a string")
            times.setdefault(k, {}).setdefault(v, []).append(float(t))
            hashes.setdefault(k, set()).add(h)
    if a.base not in variants:
        fail(f"--base {a.base}: not among the variants {variants}")
    others = [v for v in variants if v != a.base]
    lines = []
    head = f"{'row (best of rounds, us)':44s} " + " ".join(f"{v:>9s}" for v in [a.base] + others)
    head += " " + " ".join(f"{v + '/' + a.base:>9s}" for v in others) + "  bytes"
    lines.append(head)
    groups = {}
    bad = 0
    for k in sorted(times):
        x = times[k]
        missing = [v for v in variants if v not in x]
        if missing:
            lines.append(f"{k:44s} missing in {','.join(missing)}")
            bad += 1
            continue
        best = {v: min(x[v]) for v in variants}
        h = hashes[k]
        if h == {None}:
            same = "-"
        elif len(h) == 1:
            same = "same"
        else:
            same = "DIFF"
            bad += 1
        ratios = [best[v] / best[a.base] for v in others]
        lines.append(f"{k:44s} " + " ".join(f"{best[v]:9.2f}" for v in [a.base] + others) + " " +
                     " ".join(f"{r:9.3f}" for r in ratios) + f"  {same}")
        parts = k.split("/")
        if len(parts) >= 5 and parts[3].startswith("b") and parts[4].startswith("ctx"):
            groups.setdefault(parts[3] + "/" + parts[4], []).append(ratios)
    for g, rs in groups.items():
        desc = []
        for i, v in enumerate(others):
            r = sorted(x[i] for x in rs)
            desc.append(f"{v}/{a.base} median {statistics.median(r):.3f} ({r[0]:.3f}-{r[-1]:.3f})")
        lines.append(f"{g}: " + ", ".join(desc) + f", {len(rs)} rows")
    rounds = {v: max(len(x.get(v, [])) for x in times.values()) for v in variants}
    lines.append(f"variants {variants}, rounds {rounds}; rows whose bytes differ or a variant lacks: {bad}")
    text = "\n".join(lines) + "\n"
    if a.out:
        try:
            with open(a.out + ".tmp", "w") as fh:
                fh.write(text)
            os.replace(a.out + ".tmp", a.out)
        except OSError as e:
            if os.path.exists(a.out + ".tmp"):
                os.remove(a.out + ".tmp")
            fail(f"--out: {a.out}: {e.strerror}")
    sys.stdout.write(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
