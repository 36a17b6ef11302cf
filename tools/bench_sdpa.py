#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention timings for `tf-cuda-test bench attention`.

Reads a JSON list of {q_heads, kv_heads, head_dim, batch, ctx} (argv[1]), times decode
attention (one query row per sequence, bf16, dense K/V, enable_gqa=True) with the flash
and cudnn backends (CUDA events, warm-up, median), writes a JSON list to argv[2].
A backend that refuses a shape is recorded as null with its error."""
import json
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


def main():
    cfgs = json.load(open(sys.argv[1]))
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
    json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rows": out}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
