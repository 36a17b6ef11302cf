#!/usr/bin/env python3
"""Compares the serve-gate receipts of the same fixtures on cpu and on cuda: verdict, every gate's
status and failed count, every control's colour. Usage: compare.py CPU_DIR CUDA_DIR CMDS"""
import json, os, sys
cpu_dir, cuda_dir, cmds = sys.argv[1:4]
same = diff = 0
for line in open(cmds):
    name = line.split("\t")[0].strip()
    c = json.load(open(os.path.join(cpu_dir, name + ".json")))
    g = json.load(open(os.path.join(cuda_dir, name + ".json")))
    gates = lambda r: {x["name"]: (x.get("status"), x.get("failed")) for x in r["gates"]}
    ctls = lambda r: {x["name"]: x.get("red") for x in r["controls"]}
    if (c["verdict"], gates(c), ctls(c)) == (g["verdict"], gates(g), ctls(g)):
        same += 1
        continue
    diff += 1
    print(f"{name}: verdict cpu {c['verdict']}, cuda {g['verdict']}")
    for k in sorted(set(gates(c)) | set(gates(g))):
        if gates(c).get(k) != gates(g).get(k):
            print(f"  gate {k}: cpu {gates(c).get(k)}, cuda {gates(g).get(k)}")
    for k in sorted(set(ctls(c)) | set(ctls(g))):
        if ctls(c).get(k) != ctls(g).get(k):
            print(f"  control {k}: cpu red={ctls(c).get(k)}, cuda red={ctls(g).get(k)}")
print(f"{same} fixtures alike on cpu and cuda, {diff} differ")
