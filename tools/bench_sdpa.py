#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention timings for `tf-cuda-test bench attention`.

    python3 tools/bench_sdpa.py IN.json OUT.json

Reads a JSON list of {q_heads, kv_heads, head_dim, batch, ctx} (IN, positive integers), times
decode attention (one query row per sequence, bf16, dense K/V, enable_gqa=True) with the flash
and cudnn backends (CUDA events, warm-up, median), writes a JSON object to OUT:
{"torch": version, "device": name, "rows": [each configuration with flash_us and cudnn_us]}
(what bench_attention.cpp reads). A backend that refuses a shape is recorded as null with its
error (flash_error, cudnn_error). Exit 0 written; 2 bad arguments (not two, an IN that is not
such a list, an OUT whose folder is missing or not writable), one line naming it, before timing.
"""
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_one(cfg, backend, warmup=5, reps=30):
    b, hq, hkv, d, ctx = cfg["batch"], cfg["q_heads"], cfg["kv_heads"], cfg["head_dim"], cfg["ctx"]
    kv_bytes = 2 * b * hkv * ctx * d * 2
    copies = max(1, min(8, (512 << 20) // kv_bytes))
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
    ks = [torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    vs = [torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    times = []
    with sdpa_kernel([backend]):
        for i in range(warmup + reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.nn.functional.scaled_dot_product_attention(q, ks[i % copies], vs[i % copies], enable_gqa=True)
            e.record()
            torch.cuda.synchronize()
            if i >= warmup:
                times.append(s.elapsed_time(e) * 1e3)
    del ks, vs
    torch.cuda.empty_cache()
    times.sort()
    return times[len(times) // 2]


def fail(msg):
    print(f"bench_sdpa: {msg}", file=sys.stderr)
    sys.exit(2)


def read_configs(path):
    try:
        with open(path) as f:
            cfgs = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"IN: {path}: {e}")
    keys = ("q_heads", "kv_heads", "head_dim", "batch", "ctx")
    if not isinstance(cfgs, list):
        fail(f"IN: {path}: not a JSON list")
    for i, c in enumerate(cfgs):
        if not isinstance(c, dict):
            fail(f"IN: {path}: item {i} is not an object")
        for k in keys:
            if not isinstance(c.get(k), int) or isinstance(c.get(k), bool) or c[k] < 1:
                fail(f"IN: {path}: item {i}: {k} {c.get(k)!r} is not a positive integer")
    return cfgs


def main():
    if len(sys.argv) != 3:
        fail("usage: bench_sdpa.py IN.json OUT.json (IN: a JSON list of {q_heads, kv_heads, head_dim, batch, ctx})")
    cfgs = read_configs(sys.argv[1])
    out_dir = os.path.dirname(os.path.abspath(sys.argv[2]))
    if os.path.isdir(sys.argv[2]) or not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        fail(f"OUT: {sys.argv[2]}: not a file in a writable folder")
    out = []
    for cfg in cfgs:
        row = dict(cfg)
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                row[name + "_us"] = time_one(cfg, be)
            except Exception as ex:  # a backend that does not take this shape
                row[name + "_us"] = None
                row[name + "_error"] = str(ex).splitlines()[0][:200]
        out.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    with open(sys.argv[2], "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rows": out}, f)


if __name__ == "__main__":
    main()
