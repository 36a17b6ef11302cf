#!/usr/bin/env python3
"""Validates receipts against reports/schema/receipt.schema.json (JSON Schema 2020-12, with
Debian's python3-jsonschema).

    validate_receipts.py SCHEMA [--min N] PATH...

A PATH that is a file must be a receipt and validate. A PATH that is a folder: each *.json in
it that names the receipt schema ("schema": "kernel-contracts/receipt/1") must validate;
other JSON files there are listed as not receipts. A control runs first: a copy of the first
receipt with its verdict and seed broken must be refused, so a validator that accepts
anything fails the test. Exit 0 when at least N receipts (default 1) validated and none
failed, 1 otherwise, 77 (skipped) when the jsonschema module is missing."""
import copy
import glob
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("SKIP: the python3 jsonschema module is missing (apt-get install python3-jsonschema)")
    sys.exit(77)

RECEIPT = "kernel-contracts/receipt/1"


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 1
    schema_path, rest = args[0], args[1:]
    want = 1
    if rest[:1] == ["--min"]:
        want, rest = int(rest[1]), rest[2:]
    schema = json.load(open(schema_path))
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    files = []
    for p in rest:
        if os.path.isdir(p):
            for f in sorted(glob.glob(os.path.join(p, "*.json"))):
                try:
                    r = json.load(open(f))
                except ValueError as e:
                    print(f"FAIL {f}: not JSON ({e})")
                    return 1
                if isinstance(r, dict) and r.get("schema") == RECEIPT:
                    files.append((f, r))
                else:
                    print(f"not a receipt: {f}")
        else:
            if not os.path.isfile(p):
                print(f"FAIL {p}: no such file")
                return 1
            files.append((p, json.load(open(p))))
    if not files:
        print("FAIL: no receipt found")
        return 1
    broken = copy.deepcopy(files[0][1])
    broken["verdict"] = "maybe"
    broken["seed"] = -1
    if not list(v.iter_errors(broken)):
        print(f"FAIL: control: {files[0][0]} with verdict 'maybe' and seed -1 validated")
        return 1
    bad = 0
    for f, r in files:
        errs = sorted(v.iter_errors(r), key=lambda e: list(e.path))
        if errs:
            bad += 1
            for e in errs[:5]:
                print(f"FAIL {f}: {'/'.join(str(x) for x in e.path) or '(top level)'}: {e.message[:200]}")
    print(f"{len(files) - bad} of {len(files)} receipts valid (control refused)")
    if bad or len(files) - bad < want:
        if not bad:
            print(f"FAIL: expected at least {want} receipts")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
